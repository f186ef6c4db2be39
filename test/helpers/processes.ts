import { join } from 'node:path'
import { execa, type ResultPromise } from 'execa'
import { projectRoot } from '../../shared/paths.js'

export const osdBin = join(projectRoot, 'bin', 'osd')
export const osctlBin = join(projectRoot, 'bin', 'osctl')

export interface OsdProcess {
  url: string
  process: ResultPromise
  /** Every log line so far, parsed. */
  logs: Record<string, unknown>[]
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | undefined>
  /** SIGKILL: no clean-up of any kind. */
  kill(): Promise<void>
}

/**
 * A real `osd serve` process (the built one, as users run it) on a free port, resolved once it logs
 * "osd started".
 */
export async function startOsd(
  env: Record<string, string | undefined>,
  args: string[] = [],
  timeoutMs = 60_000,
): Promise<OsdProcess> {
  const child = execa('node', [osdBin, 'serve', '--port', '0', ...args], {
    env: { OSD_LOG_LEVEL: 'info', ...env },
    reject: false,
    buffer: false,
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const logs: Record<string, unknown>[] = []
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const started = new Promise<string>((resolve, reject) => {
    let pending = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      pending += chunk.toString()
      const lines = pending.split('\n')
      pending = lines.pop()!
      for (const line of lines) {
        try {
          const entry = JSON.parse(line) as Record<string, unknown>
          logs.push(entry)
          if (entry.msg === 'osd started') resolve(String(entry.url ?? ''))
        } catch {
          // not a log line
        }
      }
    })
    child.once('exit', (code) => reject(new Error(`osd exited ${code} before starting: ${stderr}`)))
    setTimeout(
      () => reject(new Error(`osd did not start in ${timeoutMs} ms: ${stderr}`)),
      timeoutMs,
    )
  })
  const url = await started
  return {
    url,
    process: child,
    logs,
    async stop() {
      child.kill('SIGTERM')
      const result = await child
      return result.exitCode
    },
    async kill() {
      child.kill('SIGKILL')
      await child
    },
  }
}

/** Runs the built osctl with a config dir of its own; never throws on a non-zero exit. */
export function osctl(
  args: string[],
  env: Record<string, string | undefined> = {},
  input?: string,
) {
  return execa('node', [osctlBin, ...args], {
    env: { NO_COLOR: '1', ...env },
    reject: false,
    input,
    stdin: input === undefined ? 'ignore' : 'pipe',
  })
}

export function osd(args: string[], env: Record<string, string | undefined> = {}) {
  return execa('node', [osdBin, ...args], { env, reject: false, stdin: 'ignore' })
}

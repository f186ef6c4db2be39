import { join } from 'node:path'
import { execa, type ResultPromise } from 'execa'
import { projectRoot } from '../../shared/paths.js'

// Real processes: the built osd and osctl, as users run them. osctl's own behaviour is tested in
// process (test/helpers/osctl.ts); a process is for what only one shows (its start and exit code,
// pipes, a pseudo-terminal, a restart of osd).

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

/** util-linux `script` gives osctl a terminal of its own (a pseudo-terminal), where none is at hand. */
export const hasScript = (await execa('script', ['--version'], { reject: false })).exitCode === 0

/**
 * Runs the built osctl; never throws on a non-zero exit. `env` is added to this process's (a config
 * dir of its own, say).
 */
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

/** Runs `osd ARGS`; `input` is piped to its stdin (a password), else stdin is closed. */
export function osd(args: string[], env: Record<string, string | undefined> = {}, input?: string) {
  return execa('node', [osdBin, ...args], {
    env,
    reject: false,
    ...(input === undefined ? { stdin: 'ignore' as const } : { input }),
  })
}

import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer } from 'node:net'
import { execa, type ResultPromise } from 'execa'
import { projectRoot } from '../shared/paths.js'

// Shared by the bench:* scripts: a daemon of their own on a throwaway embedded PostgreSQL (or
// DATABASE_URL when set), an enterprise with an all-scope token, and medians.

export interface BenchDaemon {
  url: string
  env: Record<string, string>
  token: string
  start(
    extraEnv?: Record<string, string>,
    args?: string[],
  ): Promise<{ url: string; stop(): Promise<void> }>
  close(): Promise<void>
}

export async function benchDaemon(): Promise<BenchDaemon> {
  const dataDir = await mkdtemp(join(tmpdir(), 'osd-bench-'))
  const env: Record<string, string> = {
    OSD_DATA_DIR: dataDir,
    DATABASE_URL: process.env.DATABASE_URL ?? '',
    OSD_LOG_LEVEL: process.env.OSD_LOG_LEVEL ?? 'info',
  }
  const osd = join(projectRoot, 'bin', 'osd')
  const made = await execa(
    'node',
    [osd, 'admin', 'enterprise', 'create', '--name', `Bench ${Date.now()}`, '--json'],
    {
      env,
    },
  )
  const token = JSON.parse(made.stdout).token as string
  const running: ResultPromise[] = []

  async function start(extraEnv: Record<string, string> = {}, args: string[] = []) {
    const port = await freePort()
    const child = execa('node', [osd, 'serve', '--port', String(port), ...args], {
      env: { ...env, ...extraEnv },
      stdout: 'ignore',
      reject: false,
    })
    running.push(child)
    const url = `http://127.0.0.1:${port}/v1`
    for (let i = 0; ; i++) {
      if (child.exitCode !== null) throw new Error(`osd exited ${child.exitCode}`)
      const up = await fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      )
      if (up) break
      if (i > 600) throw new Error('osd did not start in 60 s')
      await new Promise((r) => setTimeout(r, 100))
    }
    return {
      url,
      async stop() {
        child.kill('SIGTERM')
        await child
      },
    }
  }

  const first = await start()
  return {
    url: first.url,
    env,
    token,
    start,
    async close() {
      for (const child of running) child.kill('SIGTERM')
      await Promise.all(running)
      await rm(dataDir, { recursive: true, force: true })
    },
  }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

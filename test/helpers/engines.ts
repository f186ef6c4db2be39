import { randomBytes } from 'node:crypto'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createSealer, type Sealer } from '../../server/crypto.js'
import { createEnterprise } from '../../server/domain/enterprises/index.js'
import type { TestDatabase } from './db.js'
import { startOsd, type OsdProcess } from './processes.js'

/**
 * Real `osd serve --role engine` processes on a test database, sharing a server key with the test (so
 * keys the test seals, the engines can open), with short leases so takeovers happen in seconds.
 */
export async function engineHarness(db: TestDatabase, providerUrl?: string) {
  const key = randomBytes(32)
  const sealer: Sealer = createSealer(key)
  const dataDir = await mkdtemp(join(tmpdir(), 'osd-engines-'))
  const env = {
    DATABASE_URL: db.url,
    OSD_SECRET_KEY: key.toString('hex'),
    OSD_DATA_DIR: dataDir,
    OSD_LEASE_SECONDS: '3',
    ...(providerUrl
      ? { OSD_PROVIDER_A_BASE_URL: providerUrl, OSD_PROVIDER_B_BASE_URL: providerUrl }
      : {}),
  }
  const running: OsdProcess[] = []
  return {
    sealer,
    env,
    /** An engine process; `more` adds to the harness's environment (OSD_ENGINE_CONCURRENCY, say). */
    async engine(more: Record<string, string> = {}): Promise<OsdProcess> {
      const process = await startOsd({ ...env, ...more }, ['--role', 'engine'])
      running.push(process)
      return process
    },
    enterprise: (name: string) => createEnterprise(db.sql, { name }, { mailDomain: 'osd.local' }),
    /** Stops every engine started so far. */
    async stopAll(): Promise<void> {
      const stopping = running.splice(0)
      await Promise.all(stopping.map((p) => p.stop().catch(() => undefined)))
    },
  }
}

/** The engine id a process logged at start, as leases and takeover events name it. */
export function engineIdOf(process: OsdProcess): string | undefined {
  return process.logs.find((l) => l.msg === 'engine started')?.engine as string | undefined
}

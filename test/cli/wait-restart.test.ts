import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, it } from 'vitest'
import { freePort } from '../../server/db/embedded.js'
import { createTestEnterprise } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/db.js'
import { osctl } from '../helpers/osctl.js'
import { osctl as osctlProcess, startOsd, type OsdProcess } from '../helpers/processes.js'
import { eventually } from '../helpers/wait.js'

// A pipeline's `osctl runs start --wait` outlives a restart of osd (a deploy): it reads again from
// the last event it saw once osd answers, and exits by how the run ended.

const running: OsdProcess[] = []
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop().catch(() => undefined)))
})

it('follows a run across a restart of osd and exits 0 when it succeeds', async () => {
  const db = await createTestDatabase()
  const enterprise = await createTestEnterprise(db.sql, 'Restart', { mailDomain: 'osd.local' })
  const port = await freePort()
  const serve = async (role: string) => {
    const daemon = await startOsd({ DATABASE_URL: db.url }, [
      '--port',
      String(port),
      '--role',
      role,
    ])
    running.push(daemon)
    return daemon
  }
  // Serving the API only: the run waits queued until an engine comes.
  const first = await serve('api')
  const env = {
    OSCTL_CONFIG_DIR: await mkdtemp(join(tmpdir(), 'osctl-')),
    OSCTL_URL: first.url,
    OSCTL_TOKEN: enterprise.token,
  }
  const made = await osctl(
    ['tasks', 'create', '--name', 'Echo', '--kind', 'deterministic', '--role', 'ceo'],
    env,
  )
  expect(made.exitCode, made.stderr).toBe(0)

  // The pipeline's osctl, a process of its own; the task made in process before it.
  const waiter = osctlProcess(
    ['runs', 'start', 'echo', '--input', 'x=1', '--wait', '--timeout', '60'],
    env,
  )
  let stderr = ''
  waiter.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  await eventually(() => stderr.includes('run.queued'), 10_000, 'the waiter following')

  await first.stop()
  running.splice(running.indexOf(first), 1)
  await eventually(() => stderr.includes('reading again'), 10_000, 'the waiter to find osd gone')
  await serve('all')

  const res = await waiter
  expect(res.exitCode, res.stderr).toBe(0)
  expect(JSON.parse(res.stdout)).toMatchObject({ status: 'succeeded', input: { x: 1 } })
  expect(res.stderr).toMatch(/cannot reach osd at .*; reading again in/)
  expect(res.stderr.match(/run\.queued/g)).toHaveLength(1) // each event once, across the restart
  expect(res.stderr).toMatch(/run\.succeeded/)
}, 90_000)

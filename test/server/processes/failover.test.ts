import { randomBytes } from 'node:crypto'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSql, type Sql } from '../../../server/db/sql.js'
import { debianPostgres, startCluster, type Cluster } from '../../helpers/pg-cluster.js'
import { osd } from '../../helpers/osd.js'
import { startOsd, type OsdProcess } from '../../helpers/processes.js'
import { eventually } from '../../helpers/wait.js'

// A PostgreSQL failover under a running osd (issue 34): DATABASE_URL names a primary and a streaming
// standby with target_session_attrs=read-write. The primary dies (immediate stop, as a crash) and the
// standby is promoted: meanwhile osd answers 503 database_unavailable, then it finds the new primary by
// itself, and every run started before, during and after ends exactly once.

const bin = debianPostgres()
// .ci/run installs Debian's postgresql and asks for this test; elsewhere it runs where the binaries are.
const required = process.env.OSD_TEST_FAILOVER === 'required'

let cluster: Cluster
let daemon: OsdProcess
let sql: Sql
let token: string

describe.skipIf(!bin && !required)('a PostgreSQL failover', () => {
  beforeAll(async () => {
    if (!bin) throw new Error('no Debian PostgreSQL binaries (apt-get install postgresql)')
    cluster = await startCluster(bin)
    const env = {
      DATABASE_URL: cluster.url,
      OSD_DATA_DIR: await mkdtemp(join(tmpdir(), 'osd-failover-data-')),
      OSD_SECRET_KEY: randomBytes(32).toString('hex'),
    }
    daemon = await startOsd(env)
    const made = await osd(['admin', 'enterprise', 'create', '--name', 'Failover', '--json'], env)
    token = JSON.parse(made.stdout).token
    sql = createSql(cluster.url, { max: 2 })
  }, 120_000)
  afterAll(async () => {
    await sql?.end({ timeout: 1 }).catch(() => undefined)
    await daemon?.stop()
    await cluster?.close()
  })

  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${daemon.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })

  /** osd's last warnings and errors, for a failure to say what osd saw. */
  const warnings = () =>
    JSON.stringify(
      daemon.logs
        .filter((l) => ['warn', 'error', 'fatal', 40, 50, 60].includes(l.level as string))
        .slice(-5),
    )

  it('answers 503 while no primary is there, then follows the promoted standby; runs end once', async () => {
    const task = (await (
      await call('POST', '/tasks', {
        name: 'Failover step',
        kind: 'deterministic',
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        serializeOn: ['n'],
      })
    ).json()) as { id: string }
    // Starts keep coming, before, during and after the failover: what each was answered.
    const acknowledged: string[] = []
    const refused: number[] = []
    let going = true
    let n = 0
    // When the start being made was sent: one that hangs stops the starts (said if the test fails).
    let asked = 0
    const starting = (async () => {
      while (going) {
        asked = Date.now()
        const res = await call('POST', `/tasks/${task.id}/runs`, { n: n++ }).catch(() => undefined)
        if (res?.status === 201) acknowledged.push(((await res.json()) as { id: string }).id)
        else if (res) {
          refused.push(res.status)
          await res.body?.cancel()
        }
        await new Promise((r) => setTimeout(r, 50))
      }
    })()
    await eventually(() => acknowledged.length >= 10, 20_000, 'runs started before the failover')

    await cluster.killPrimary()
    const killed = Date.now()
    await eventually(
      () => refused.includes(503),
      20_000,
      `a 503 while no primary is there (answered: ${refused.join()}; started ${acknowledged.length})`,
    )
    const health = await fetch(`${daemon.url}/health`)
    expect(health.status).toBe(503)
    // A second without a primary, as an operator's promotion takes at least.
    await new Promise((r) => setTimeout(r, 1_000))
    const before = acknowledged.length
    const refusedAtPromotion = refused.length
    await cluster.promoteStandby()
    const promoted = Date.now()
    await eventually(
      () => acknowledged.length > before,
      60_000,
      () =>
        `a run started on the new primary (answered since the promotion: ${refused.slice(refusedAtPromotion).join() || 'nothing'}; the last start sent ${Date.now() - asked} ms ago; osd's last warnings: ${warnings()})`,
    )
    const recovered = Date.now()
    const refusedBefore = refused.length
    await eventually(
      () => acknowledged.length >= before + 10,
      30_000,
      () =>
        `runs after the failover (started ${acknowledged.length - before} since the promotion; answered meanwhile: ${refused.slice(refusedBefore).join() || 'nothing else'}; the last start sent ${Date.now() - asked} ms ago; osd's last warnings: ${warnings()})`,
    )
    going = false
    await starting
    console.info(
      `failover: 503 from the kill, ${promoted - killed} ms to the promotion, first start answered ${recovered - promoted} ms after it`,
    )

    // Every run acknowledged is there (synchronous replication) and every run there ends, once.
    await eventually(
      async () => {
        const [row] = await sql<{ open: number }[]>`
          select count(*)::int as open from runs where status not in ('succeeded', 'failed', 'cancelled')`
        return row!.open === 0
      },
      60_000,
      'every run to end',
    )
    const runs = await sql<{ id: string; status: string; ends: number }[]>`
      select r.id, r.status,
             (select count(*)::int from run_events e where e.run_id = r.id
               and e.type in ('run.succeeded', 'run.failed', 'run.cancelled')) as ends
        from runs r where r.task_id = ${task.id}`
    const byId = new Map(runs.map((r) => [r.id, r]))
    expect(acknowledged.filter((id) => !byId.has(id))).toEqual([])
    expect(runs.filter((r) => r.status !== 'succeeded' || r.ends !== 1)).toEqual([])
    expect((await fetch(`${daemon.url}/health`)).status).toBe(200)
  }, 180_000)
})

import { afterAll, beforeAll, expect, it } from 'vitest'
import { enqueueRun } from '../../../server/domain/runs/index.js'
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js'
import { engineHarness } from '../../helpers/engines.js'
import { osd } from '../../helpers/osd.js'
import { startOsd, type OsdProcess } from '../../helpers/processes.js'
import { eventually } from '../../helpers/wait.js'
import {
  startFakeModelProvider,
  type FakeModelProvider,
  type RecordedRequest,
} from '../../fakes/model-provider.js'

// Runs ending together, in every way, with real processes (issue 42): two engines and an API process
// on one database, a few hundred llm runs under way at any moment for 10 s (OSD_TEST_STRESS_SECONDS
// changes it; the code before issue 42's fix deadlocked about once a second under it, so 10 s misses
// such a fault about once in 20,000 runs, at half the CPU of the 20 s it had (issue 40); a longer run,
// 60 s or more, is for a change to these paths): some succeed, some fail on a provider's 400 (calling for os-improve runs, which run too),
// some are cancelled wherever they are, some have their gate turned down; half are started through the
// API, half enqueued as schedules and webhooks start them, for admission to admit. Then: PostgreSQL
// detected no deadlock and no process logged one, every run ended exactly once and none was taken over,
// and the fake provider got exactly one call per journaled model step.

const seconds = Number(process.env.OSD_TEST_STRESS_SECONDS ?? 10)
const underWay = 200

let db: TestDatabase
let model: FakeModelProvider
const daemons: OsdProcess[] = []

beforeAll(async () => {
  db = await createTestDatabase()
  model = await startFakeModelProvider()
})
afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop().catch(() => undefined)))
  await model?.close()
})

type Kind = 'succeed' | 'fail' | 'cancel' | 'gate'
const kinds: Kind[] = ['succeed', 'fail', 'cancel', 'gate']

/** The run a request is for (its input's n), its kind, and whether it follows a tool's answer. */
function about(request: RecordedRequest) {
  const text = JSON.stringify(request.body?.messages ?? [])
  return {
    n: Number(/\\"n\\": (\d+)/.exec(text)?.[1] ?? NaN),
    kind: /\\"kind\\": \\"(\w+)\\"/.exec(text)?.[1] as Kind | undefined,
    answered: /A person refused this call/.test(text),
  }
}

it('ends hundreds of runs at once in every way: no deadlock, each ended once, each call once', async () => {
  const harness = await engineHarness(db, model.url)
  const env = { ...harness.env, OSD_LEASE_SECONDS: '30', OSD_IMPROVE_INTERVAL_MINUTES: '0' }
  model.onRequest((request) => {
    const { kind, answered } = about(request)
    const finish = (outcome: string) => ({
      toolCalls: [{ name: 'os.finish', arguments: { outcome, summary: outcome } }],
    })
    if (kind === 'succeed') return finish('succeeded')
    if (kind === 'fail') return { status: 400, message: 'the fake refuses this run' }
    if (kind === 'cancel') return { ...finish('succeeded'), delayMs: 400 }
    if (kind === 'gate')
      return answered
        ? finish('failed')
        : {
            toolCalls: [
              {
                name: 'os.mail_send',
                arguments: { to: 'boss@example.com', subject: 'Hello', body: 'Hi.' },
              },
            ],
          }
    return { text: 'Nothing to change.' } // an os-improve run
  })
  const [deadlocksBefore] = await db.sql<{ n: number }[]>`
    select deadlocks::int as n from pg_stat_database where datname = current_database()`

  daemons.push(
    await startOsd(env, ['--role', 'api']),
    await startOsd(env, ['--role', 'engine']),
    await startOsd(env, ['--role', 'engine']),
  )
  const api = daemons[0]!
  const created = await osd(['admin', 'enterprise', 'create', '--name', 'Ends Co', '--json'], env)
  expect(created.exitCode, created.stderr).toBe(0)
  const { token, enterprise } = JSON.parse(created.stdout)
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: res.status, body: (await res.json().catch(() => undefined)) as any }
  }
  expect(
    (await call('PATCH', '/enterprise/concurrency', { concurrentRunLimit: 1000 })).status,
  ).toBe(200)
  expect(
    (await call('POST', '/llm/bindings', { apiKey: 'key-ends-co', provider: 'provider_a' })).status,
  ).toBe(201)
  const taskOf = new Map<Kind, string>()
  for (const kind of kinds) {
    const res = await call('POST', '/tasks', {
      name: `Ends ${kind}`,
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      serializeOn: ['n'],
      ...(kind === 'gate'
        ? { tools: ['os.mail_send'], gates: [{ tool: 'os.mail_send', owner: 'ceo' }] }
        : {}),
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    taskOf.set(kind, res.body.id)
  }

  // The load: starts to keep about `underWay` runs under way, cancels and rejections as they come.
  let n = 0
  const toCancel: string[] = []
  const started: string[] = []
  const from = Date.now()
  const until = from + seconds * 1000
  const live = async () => {
    const [row] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from runs
       where status in ('pending', 'queued', 'running', 'blocked', 'waiting_on_gate')`
    return row!.n
  }
  const rejectWaiting = async () => {
    const gates = await call('GET', '/gates?limit=200')
    await Promise.all(
      (gates.body ?? []).map((gate: { id: string }) =>
        call('POST', `/gates/${gate.id}/decision`, { decision: 'reject', note: 'Not now.' }),
      ),
    )
  }
  // For `seconds` at least, and on until more than `underWay` runs have started: on a loaded machine
  // (the 2 shared cores this suite runs on) the first waves alone outlast 10 s, and the test is of
  // hundreds of runs ending together, not of how fast they start.
  while (Date.now() < until || started.length <= underWay) {
    const room = Math.max(0, underWay - (await live()))
    const wave = Array.from({ length: Math.min(room, 80) }, () => {
      const kind = kinds[n % kinds.length]!
      return { kind, input: { n: n++, kind } }
    })
    const ids = await Promise.all(
      wave.map(async ({ kind, input }, i) => {
        const taskId = taskOf.get(kind)!
        if (i % 2 === 0) {
          const res = await call('POST', `/tasks/${taskId}/runs`, input)
          expect(res.status, JSON.stringify(res.body)).toBe(201)
          return res.body.id as string
        }
        return (await enqueueRun(db.sql, enterprise.id, taskId, input, { origin: 'webhook' })).id
      }),
    )
    started.push(...ids)
    wave.forEach(({ kind }, i) => kind === 'cancel' && toCancel.push(ids[i]!))
    await new Promise((r) => setTimeout(r, 200))
    await Promise.all(toCancel.splice(0).map((id) => call('POST', `/runs/${id}/cancel`)))
    await rejectWaiting()
  }
  const loadSeconds = Math.round((Date.now() - from) / 1000)
  // Everything ends: the last gates turned down, the os-improve runs done.
  await eventually(
    async () => {
      await rejectWaiting()
      return (await live()) === 0
    },
    180_000,
    'every run to end',
  )

  // No deadlock, in PostgreSQL's count or any process's log.
  const [deadlocksAfter] = await db.sql<{ n: number }[]>`
    select deadlocks::int as n from pg_stat_database where datname = current_database()`
  const ended = await db.sql<{ status: string; n: number }[]>`
    select status, count(*)::int as n from runs group by status order by status`
  console.log(
    `run-ends.test.ts: ${started.length} runs started over ${loadSeconds} s; ended ${JSON.stringify(ended)}; deadlocks ${deadlocksAfter!.n - deadlocksBefore!.n}`,
  )
  expect(deadlocksAfter!.n - deadlocksBefore!.n).toBe(0)
  const logged = daemons
    .flatMap((d) => d.logs)
    .filter((l) => /deadlock|40P01/.test(JSON.stringify(l)))
  expect(logged).toEqual([])
  expect(started.length).toBeGreaterThan(underWay)

  // Each run ended exactly once, none taken over.
  const [counts] = await db.sql<{ runs: number; ends: number; wrong: number; takeovers: number }[]>`
    with ends as (
      select r.id, count(e.id) filter (where e.type in ('run.succeeded', 'run.failed', 'run.cancelled')) as n
        from runs r left join run_events e on e.run_id = r.id
       group by r.id)
    select (select count(*)::int from runs) as runs,
           (select count(*)::int from ends where n = 1) as ends,
           (select count(*)::int from ends where n <> 1) as wrong,
           (select count(*)::int from run_events where type = 'run.lease_taken_over') as takeovers`
  const troubles = daemons
    .flatMap((d) => d.logs)
    .filter((l) => Number(l.level) >= 40)
    .map((l) => JSON.stringify(l).slice(0, 600))
  expect(counts, troubles.join('\n')).toMatchObject({ wrong: 0, takeovers: 0 })
  expect(counts!.ends).toBe(counts!.runs)
  for (const kind of kinds) {
    const [row] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from runs where task_id = ${taskOf.get(kind)!}`
    expect(row!.n, kind).toBeGreaterThan(0)
  }

  // One call per journaled model step: of each run of ours (by its n), and of os-improve's runs.
  const steps = await db.sql<{ n: number | null; status: string; steps: number; done: number }[]>`
    select (r.input ->> 'n')::int as n, r.status,
           count(*)::int as steps, count(*) filter (where j.state = 'done')::int as done
      from run_journal j join runs r on r.id = j.run_id
     where j.kind = 'model'
     group by r.id, r.input, r.status`
  const calls = new Map<number, number>()
  let improveCalls = 0
  for (const request of model.requests) {
    const { n: of } = about(request)
    if (Number.isNaN(of)) improveCalls++
    else calls.set(of, (calls.get(of) ?? 0) + 1)
  }
  const wrong = steps.filter((s) => {
    if (s.n === null) return false
    const made = calls.get(s.n) ?? 0
    // A cancelled run's call may have been stopped before it reached the provider.
    return s.status === 'cancelled' ? made > s.steps || made < s.done : made !== s.steps
  })
  expect(wrong).toEqual([])
  const improveSteps = steps.filter((s) => s.n === null).reduce((sum, s) => sum + s.steps, 0)
  expect(improveCalls).toBe(improveSteps)
}, 360_000)

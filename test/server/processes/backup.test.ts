import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync, gzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnterprise, type TestEnterprise } from '../../helpers/app.js'
import { createEmptyDatabase, createTestDatabase, type TestDatabase } from '../../helpers/db.js'
import { serveInProcess } from '../../helpers/osctl.js'
import { osd } from '../../helpers/osd.js'
import { osd as osdProcess, startOsd, type OsdProcess } from '../../helpers/processes.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'
import type { Running } from '../../../server/serve.js'

// osd admin backup | restore (issue 46), as operators run them, against a daemon at work. An
// enterprise with tasks, runs, a gate waiting, memory and chats is copied while runs are being started
// (in another enterprise), restored into a new data dir (the embedded PostgreSQL), and served again by
// a real `osd serve`: every list and detail answers the same, its token works, its model key opens.
// osd admin runs in process (test/helpers/osd.ts; issue 40), but for the copy made during the runs:
// one real `bin/osd admin backup`, the binary's wiring for backups (its file, stdout, exit code).

let db: TestDatabase
let source: Running
let model: FakeModelProvider
let mcp: FakeMcpServer
let work: string
const serverKey = randomBytes(32).toString('hex')
const mcpToken = `mcp-${randomUUID()}`
const merge = 'vcs.merge_pull_request'

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'osd-backup-'))
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer({ token: mcpToken })
  db = await createTestDatabase()
  source = await serveInProcess(db, {
    OSD_SECRET_KEY: serverKey,
    OSD_PROVIDER_A_BASE_URL: model.url,
    OSD_PROVIDER_B_BASE_URL: model.url,
    OSD_LOG_LEVEL: 'warn',
    // The fake tool server is on 127.0.0.1 (vitest.config.ts allows it to every test's osd).
    OSD_EGRESS_ALLOW: process.env.OSD_EGRESS_ALLOW ?? '',
    // The prune test below runs its passes itself.
    OSD_RETENTION: 'off',
  })
})
afterAll(async () => {
  await source?.stop()
  await mcp?.close()
  await model?.close()
  await rm(work, { recursive: true, force: true })
})

/** Calls a daemon as a token does. */
function client(base: string, token: string) {
  return async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await res.text()
    return { status: res.status, body: text ? JSON.parse(text) : undefined }
  }
}

type Call = ReturnType<typeof client>

async function ok(call: Call, method: string, path: string, body?: unknown, status = [200, 201]) {
  const res = await call(method, path, body)
  expect(status, `${method} ${path}: ${JSON.stringify(res.body)}`).toContain(res.status)
  return res.body
}

async function waitRun(call: Call, id: string, statuses: string[]) {
  let last = ''
  await eventually(
    async () => {
      last = (await ok(call, 'GET', `/runs/${id}`)).run.status
      return statuses.includes(last)
    },
    20_000,
    `run ${id} ${statuses.join('|')} (is ${last})`,
  )
}

/** The enterprise the copy is judged by: tasks, runs, a gate waiting, memory, chats, keys. */
async function fixture(e: TestEnterprise) {
  const call = client(source.url!, e.token)
  const key = `key-${randomUUID()}`
  await ok(call, 'POST', '/llm/bindings', { apiKey: key, provider: 'provider_a' })
  const [team] = await ok(call, 'GET', '/teams')
  await ok(call, 'POST', '/tools/bindings', {
    name: 'vcs',
    url: mcp.url,
    token: mcpToken,
    layer: 'team',
    layerId: team.id,
  })
  const det = await ok(call, 'POST', '/tasks', {
    name: 'Router',
    kind: 'deterministic',
    assigneeRole: 'ceo',
    overlapPolicy: 'os',
    serializeOn: ['n'],
  })
  const llm = await ok(call, 'POST', '/tasks', {
    name: 'Merger',
    teamId: team.id,
    assigneeRole: 'ceo',
    overlapPolicy: 'os',
    serializeOn: ['n'],
    tools: [merge, 'os.set_gate_summary'],
    gates: [{ tool: merge, owner: 'ceo', approval: 'specific' }],
  })
  const runs: string[] = []
  for (let i = 0; i < 3; i++) {
    const run = await ok(call, 'POST', `/tasks/${det.id}/runs`, { n: i })
    await waitRun(call, run.id, ['succeeded'])
    runs.push(run.id)
  }
  model.script(
    key,
    { toolCalls: [{ name: 'os.set_gate_summary', arguments: { summary: 'Merge #7' } }] },
    { toolCalls: [{ name: merge, arguments: { repo: 'acme/app', number: 7 } }] },
  )
  const gated = await ok(call, 'POST', `/tasks/${llm.id}/runs`, { n: 'gated' })
  await waitRun(call, gated.id, ['waiting_on_gate'])
  runs.push(gated.id)
  await ok(call, 'POST', `/tasks/${det.id}/memory`, { text: 'Route invoices to finance.' })
  await ok(call, 'POST', `/tasks/${llm.id}/memory`, { text: 'Merge only green builds.' })
  const member = await ok(call, 'POST', '/members', { name: 'Grace' })
  const chat = await ok(call, 'POST', '/chats', { memberId: member.id })
  model.script(key, { text: 'Aye.' })
  await ok(call, 'POST', `/chats/${chat.id}/messages`, { content: 'Hello' })
  await eventually(
    async () => (await ok(call, 'GET', `/chats/${chat.id}`)).messages.length === 2,
    20_000,
    'the reply',
  )
  await ok(call, 'POST', `/chats/${chat.id}/close`)
  await ok(call, 'PATCH', '/enterprise/retention', { finishedRuns: 'P10D', archive: false })
  return { key, runs, tasks: [det.id, llm.id], chats: [chat.id], members: [member.id] }
}

/** Every list, and the detail of each of the fixture's things, as the enterprise's token reads them. */
async function answers(call: Call, base: string, f: Awaited<ReturnType<typeof fixture>>) {
  const lists = [
    '/enterprise',
    '/enterprise/retention',
    '/enterprise/concurrency',
    '/tasks',
    '/runs?limit=200',
    '/executions?limit=200',
    '/executions/counts',
    '/blockers',
    '/gates',
    '/memory',
    '/memory/review',
    '/chats',
    '/members',
    '/teams',
    '/roles',
    '/llm/connections',
    '/llm/bindings',
    '/tools/bindings',
    '/spend',
    '/webhooks',
    '/plans',
    '/recommendations',
  ]
  const out: Record<string, unknown> = {}
  for (const path of lists) out[path] = await ok(call, 'GET', path)
  const details = [
    ...f.runs.flatMap((id) => [`/runs/${id}`, `/executions/${id}`]),
    `/runs/${f.runs.at(-1)}/log`,
    ...f.tasks.flatMap((id) => [`/tasks/${id}`, `/tasks/${id}/versions`, `/tasks/${id}/memory`]),
    ...f.chats.map((id) => `/chats/${id}`),
    ...f.members.map((id) => `/members/${id}`),
    ...(out['/gates'] as { id: string }[]).map((g) => `/gates/${g.id}`),
    ...(out['/memory'] as { notes: { id: string }[] }).notes.map((n) => `/memory/${n.id}`),
    ...(out['/llm/connections'] as { id: string }[]).map((c) => `/llm/connections/${c.id}/usage`),
  ]
  for (const path of details) {
    const res = await call('GET', path)
    out[path] = { status: res.status, body: res.body }
  }
  // Addresses the daemon makes from the request (a task's webhook URL) name the daemon's own port.
  return JSON.parse(
    JSON.stringify(out).replaceAll(new URL(base).origin, 'http://osd'),
  ) as typeof out
}

describe('osd admin backup and restore (issue 46)', () => {
  let enterprise: TestEnterprise
  let f: Awaited<ReturnType<typeof fixture>>
  let before: Record<string, unknown>
  let file: string
  let restored: OsdProcess | undefined
  let busyIds: string[]
  let busy: TestEnterprise
  const dataDir = () => join(work, 'restored')
  const postmasterPid = () => join(dataDir(), 'pg', 'postmaster.pid')

  afterAll(async () => {
    await restored?.stop()
  })

  it('copies the database while runs are being started; verify reads it whole', async () => {
    enterprise = await createTestEnterprise(db.sql, 'Backed Up', { mailDomain: 'osd.local' })
    f = await fixture(enterprise)
    before = await answers(client(source.url!, enterprise.token), source.url!, f)

    // Another enterprise starts runs all along the copy.
    busy = await createTestEnterprise(db.sql, 'Busy', { mailDomain: 'osd.local' })
    const busyCall = client(source.url!, busy.token)
    const task = await ok(busyCall, 'POST', '/tasks', {
      name: 'Tick',
      kind: 'deterministic',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      serializeOn: ['n'],
    })
    busyIds = []
    let starting = true
    const starter = (async () => {
      while (starting) {
        const run = await ok(busyCall, 'POST', `/tasks/${task.id}/runs`, { n: randomUUID() })
        busyIds.push(run.id)
      }
    })()
    await eventually(() => busyIds.length >= 5, 20_000, 'runs being started')
    file = join(work, 'osd.backup.gz')
    const startedBefore = busyIds.length
    // The one real `osd admin backup` of the file: bin/osd's wiring, end to end.
    const made = await osdProcess(['admin', 'backup', '--out', file, '--json'], {
      DATABASE_URL: db.url,
    })
    const startedDuring = busyIds.length
    starting = false
    await starter
    expect(made.exitCode, made.stderr).toBe(0)
    const summary = JSON.parse(made.stdout)
    expect(summary).toMatchObject({
      file,
      tables: expect.any(Number),
      migrations: expect.stringMatching(/^\d{4}_/),
    })
    expect(summary.bytes).toBe((await stat(file)).size)
    expect(startedDuring).toBeGreaterThan(startedBefore)

    const verified = await osd(['admin', 'backup', '--verify', file, '--json'], {})
    expect(verified.exitCode, verified.stderr).toBe(0)
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, rows: summary.rows })
    // About 26 s on one core (taskset -c 0, a loaded machine): a timeout of about four times that.
  }, 120_000)

  it('restores into a new data dir; every list and detail answers the same, the token works, the model key opens', async () => {
    const worker = { ...process.env }
    const res = await osd(['admin', '--data-dir', dataDir(), 'restore', file, '--json'], {
      OSD_LOG_LEVEL: 'warn',
    })
    expect(res.exitCode, res.stderr).toBe(0)
    expect(JSON.parse(res.stdout)).toMatchObject({ tables: expect.any(Number) })
    // In process as in its own: the embedded PostgreSQL it started is stopped when the command
    // returns, and the worker's environment is as it was.
    await expect(stat(postmasterPid())).rejects.toThrow()
    expect({ ...process.env }).toEqual(worker)

    restored = await startOsd(
      {
        OSD_DATA_DIR: dataDir(),
        OSD_SECRET_KEY: serverKey,
        OSD_PROVIDER_A_BASE_URL: model.url,
        OSD_PROVIDER_B_BASE_URL: model.url,
        OSD_IMPROVE_INTERVAL_MINUTES: 'off',
      },
      [],
      120_000,
    )
    // The file the restore's check looks at, there while a server runs.
    expect((await stat(postmasterPid())).isFile()).toBe(true)
    const call = client(restored.url, enterprise.token)
    expect(await answers(call, restored.url, f)).toEqual(before)

    // Of the runs started during the copy, those started before its snapshot, and no other.
    const busyRuns = await ok(client(restored.url, busy.token), 'GET', '/runs?limit=200')
    expect(busyRuns.total).toBeGreaterThanOrEqual(1)
    expect(busyRuns.total).toBeLessThan(busyIds.length)
    for (const run of busyRuns.data) expect(busyIds).toContain(run.id)

    // The model key, sealed in the source, opens here: a gated run goes on once approved.
    const [gate] = before['/gates'] as { id: string }[]
    model.script(f.key, {
      toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'merged' } }],
    })
    const calls = model.callsWith(f.key).length
    await ok(call, 'POST', `/gates/${gate!.id}/decision`, { decision: 'approve' })
    await waitRun(call, f.runs.at(-1)!, ['succeeded'])
    expect(model.callsWith(f.key).length).toBe(calls + 1)
    expect(mcp.callsOf('merge_pull_request').length).toBeGreaterThanOrEqual(1)
    // About 70 s on one core (taskset -c 0, a loaded machine): three times that and some.
  }, 240_000)

  it('refuses to restore into a database that holds data', async () => {
    await restored?.stop()
    restored = undefined
    const again = await osd(['admin', '--data-dir', dataDir(), 'restore', file], {
      OSD_LOG_LEVEL: 'warn',
    })
    expect(again.exitCode).toBe(1)
    expect(again.stderr).toContain('the target database holds data')
    await expect(stat(postmasterPid())).rejects.toThrow()
    const into = await osd(['admin', 'restore', file], { DATABASE_URL: db.url })
    expect(into.exitCode).toBe(1)
    expect(into.stderr).toContain('holds data')
  }, 120_000)

  it('refuses to start with a server key that does not open the stored secrets', async () => {
    // A real `osd serve`: what is shown is its exit.
    const wrong = await osdProcess(['serve', '--port', '0'], {
      OSD_DATA_DIR: dataDir(),
      OSD_SECRET_KEY: randomBytes(32).toString('hex'),
      OSD_LOG_LEVEL: 'warn',
    })
    expect(wrong.exitCode).toBe(2)
    expect(wrong.stderr).toContain(
      'the server key does not open the secrets stored in this database',
    )
    expect(wrong.stderr).toContain('OSD_SECRET_KEY')
    // About 40 s on one core (an embedded PostgreSQL started): three times that.
  }, 150_000)

  it('verify finds a damaged or tampered copy; a truncated one too', async () => {
    const bytes = await readFile(file)
    const flipped = Buffer.from(bytes)
    flipped[Math.floor(bytes.length / 2)]! ^= 0xff
    await writeFile(join(work, 'flipped.gz'), flipped)
    const damaged = await osd(['admin', 'backup', '--verify', join(work, 'flipped.gz')], {})
    expect(damaged.exitCode).toBe(1)
    expect(damaged.stderr).toMatch(/error: .*(damaged|checksum|rows)/)

    await writeFile(join(work, 'short.gz'), bytes.subarray(0, Math.floor(bytes.length * 0.7)))
    const short = await osd(['admin', 'backup', '--verify', join(work, 'short.gz')], {})
    expect(short.exitCode).toBe(1)

    // Rows changed and compressed again: gzip is whole, the checksum is not.
    const text = gunzipSync(bytes)
      .toString('utf8')
      .replace('Route invoices to finance.', 'Route invoices to sales!!.')
    await writeFile(join(work, 'tampered.gz'), gzipSync(text))
    const tampered = await osd(['admin', 'backup', '--verify', join(work, 'tampered.gz')], {})
    expect(tampered.exitCode).toBe(1)
    expect(tampered.stderr).toContain('checksum')
    // A restore of it restores nothing: the rows are checked as they are read.
    const target = await createEmptyDatabase()
    const restore = await osd(['admin', 'restore', join(work, 'tampered.gz')], {
      DATABASE_URL: target.url,
    })
    expect(restore.exitCode).toBe(1)
    expect(restore.stderr).toContain('checksum')
    expect(await target.sql`select 1 from tasks`).toEqual([])
    expect(await target.sql`select 1 from enterprises`).toEqual([])
    // About 55 s on one core when four osd processes ran here (before issue 40): three times that.
  }, 180_000)

  it('refuses to fill the disk: the free space is looked at before a byte is written', async () => {
    const out = join(work, 'too-big.gz')
    const res = await osd(['admin', 'backup', '--out', out, '--keep-free', String(2 ** 60)], {
      DATABASE_URL: db.url,
    })
    expect(res.exitCode).toBe(1)
    expect(res.stderr).toContain('not enough free space')
    await expect(stat(out)).rejects.toThrow()
    await expect(stat(`${out}.partial`)).rejects.toThrow()
  })
})

describe('osd admin prune (issue 46)', () => {
  it('says what a pass would move with --dry-run, and moves it without', async () => {
    const e = await createTestEnterprise(db.sql, 'Pruned', { mailDomain: 'osd.local' })
    const call = client(source.url!, e.token)
    const task = await ok(call, 'POST', '/tasks', {
      name: 'Old',
      kind: 'deterministic',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      serializeOn: ['n'],
    })
    const ids: string[] = []
    for (let i = 0; i < 3; i++) {
      const run = await ok(call, 'POST', `/tasks/${task.id}/runs`, { n: i })
      await waitRun(call, run.id, ['succeeded'])
      ids.push(run.id)
    }
    await db.sql`
      update runs set created_at = created_at - interval '100 days', finished_at = finished_at - interval '100 days'
       where enterprise_id = ${e.id}`
    const archiveDir = join(work, 'archive')
    const env = { DATABASE_URL: db.url, OSD_ARCHIVE_DIR: archiveDir }
    const dry = await osd(['admin', 'prune', '--dry-run', '--enterprise', e.slug, '--json'], env)
    expect(dry.exitCode, dry.stderr).toBe(0)
    expect(JSON.parse(dry.stdout)).toEqual([
      expect.objectContaining({ slug: e.slug, runs: 3, executions: 3, chats: 0, archive: true }),
    ])
    const human = await osd(['admin', 'prune', '--dry-run', '--enterprise', e.slug], env)
    expect(human.stdout).toContain(`${e.slug}\truns\t3 (3 executions)\tarchived`)
    expect((await db.sql`select 1 from runs where enterprise_id = ${e.id}`).length).toBe(3)

    const pruned = await osd(['admin', 'prune', '--enterprise', e.slug, '--json'], env)
    expect(pruned.exitCode, pruned.stderr).toBe(0)
    expect(JSON.parse(pruned.stdout)).toEqual([expect.objectContaining({ runs: 3 })])
    expect((await db.sql`select 1 from runs where enterprise_id = ${e.id}`).length).toBe(0)
    const nothing = await osd(['admin', 'prune', '--dry-run', '--enterprise', e.slug], env)
    expect(nothing.stdout.trim()).toBe('nothing is past its window')
    // About 40 s on one core when four osd processes ran here (before issue 40): three times that
    // and some.
  }, 150_000)
})

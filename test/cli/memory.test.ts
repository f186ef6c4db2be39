import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  addNote,
  askMemory,
  askTaskMemory,
  dismissItem,
  extendNote,
  listNotes,
  noteImpact,
  listReview,
  rateNote,
  resolveItem,
  tombstoneNote,
  trainMemory,
  trainTaskNote,
} from '../../cli/commands/memory.js'
import { ApiRequestError, CliError, exitCodes } from '../../cli/errors.js'
import {
  MemoryAsk,
  MemoryNote,
  NotePage,
  RecallHealth,
  ReviewDecision,
  ReviewHistoryPage,
  ReviewPage,
  TaskMemory,
} from '../../shared/schemas/memory.js'
import { Run } from '../../shared/schemas/runs.js'
import { FakeApi, fakeDeps, type Answer, type Sent } from '../helpers/cli.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'

// osctl memory and osctl tasks memory. In process first: the actions called with deps of the test's
// own (a client whose transport answers what the test says and records what was sent, and captured
// output), so what each verb sends and prints is seen exactly, including `memory train`, whose route
// another branch adds. Then the whole of osctl, still in process, against a real daemon, its --json
// parsed by the shared schemas.

const now = () => new Date().toISOString()

function note(overrides: Partial<MemoryNote> = {}): MemoryNote {
  return MemoryNote.parse({
    id: randomUUID(),
    layer: 'task',
    taskId: randomUUID(),
    teamId: null,
    text: 'EU invoices arrive after 06:00 UTC',
    kind: 'note',
    correctsId: null,
    supersededById: null,
    status: 'active',
    source: 'person',
    evidence: [],
    ratingUp: 0,
    ratingDown: 0,
    recalls: 0,
    validUntil: null,
    expired: false,
    impact: {
      recalledRuns: 0,
      succeeded: 0,
      failed: 0,
      successRate: null,
      baseRate: null,
      lift: null,
    },
    createdBy: 'token:x',
    createdAt: now(),
    updatedAt: now(),
    ...overrides,
  })
}

function run(overrides: Partial<Run> = {}): Run {
  return Run.parse({
    id: randomUUID(),
    status: 'pending',
    input: { layer: 'team' },
    costUsdCents: 0,
    costUnpriced: false,
    startedAt: null,
    finishedAt: null,
    taskId: randomUUID(),
    taskVersionId: randomUUID(),
    taskSlug: 'os-train-memory',
    memberId: null,
    executionId: randomUUID(),
    previousRunId: null,
    origin: 'api',
    result: null,
    reason: null,
    traceId: null,
    createdAt: now(),
    updatedAt: now(),
    ...overrides,
  })
}

const taskUuid = randomUUID()
const teamUuid = randomUUID()

/** Answers the slug look-ups every verb may make: task `nightly`, team `platform`. */
function lookups(req: Sent): Answer | undefined {
  if (req.method === 'GET' && req.path === '/tasks')
    return {
      body: { data: [{ id: taskUuid, slug: 'nightly' }], page: 1, limit: 200, total: 1, pages: 1 },
    }
  if (req.method === 'GET' && req.path === '/teams')
    return { body: [{ id: teamUuid, slug: 'platform' }] }
  return undefined
}

async function failure(promise: Promise<unknown>): Promise<CliError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(CliError)
  return err as CliError
}

describe('osctl memory, in process', () => {
  it('list --all follows the {notes, page, limit, total} pages to the last one', async () => {
    const notes = Array.from({ length: 5 }, (_, i) => note({ text: `lesson ${i}` }))
    const api = new FakeApi((req) => {
      const page = Number(req.query.page ?? 1)
      const limit = Number(req.query.limit)
      return {
        body: {
          notes: notes.slice((page - 1) * limit, page * limit),
          page,
          limit,
          total: notes.length,
        },
      }
    })
    const json = fakeDeps(api, { json: true })
    await listNotes(json.deps, { all: true, limit: '2', layer: 'task' })
    expect(api.sent.map((r) => [r.path, r.query])).toEqual([
      ['/memory', { layer: 'task', limit: '2', page: '1' }],
      ['/memory', { layer: 'task', limit: '2', page: '2' }],
      ['/memory', { layer: 'task', limit: '2', page: '3' }],
    ])
    expect(MemoryNote.array().parse(JSON.parse(json.stdout()))).toEqual(notes)

    // Without --all: one page, and a note on stderr that there are more.
    const one = fakeDeps(api)
    await listNotes(one.deps, { limit: '2' })
    expect(one.stdout().split('\n')[0]).toMatch(/^ID\s+LAYER\s+OWNER\s+TEXT\s+RATINGS\s+RECALLS$/)
    expect(one.stdout()).toContain(`${notes[0]!.id}  task   ${notes[0]!.taskId}  lesson 0  +0 -0`)
    expect(one.stderr()).toBe('page 1 of 3, 5 notes: --page N for another, --all for every one\n')
  })

  it('list names the task and team by slug, and prints a long note on one line: whole in a pipe, cut on a terminal', async () => {
    const long = note({ text: `first line\n${'word '.repeat(40)}` })
    const api = new FakeApi(
      (req) => lookups(req) ?? { body: { notes: [long], page: 1, limit: 25, total: 1 } },
    )
    const { deps, stdout } = fakeDeps(api, { tty: true, columns: 120 })
    await listNotes(deps, { q: 'invoice', task: 'nightly', team: 'platform', kind: 'note' })
    expect(api.sent.at(-1)!.query).toEqual({
      q: 'invoice',
      taskId: taskUuid,
      teamId: teamUuid,
      kind: 'note',
    })
    const row = stdout().split('\n')[1]!
    expect(row).toContain('first line word')
    expect(row).toContain('…')
    expect(row).toContain(long.id)
    expect(
      Math.max(
        ...stdout()
          .split('\n')
          .map((l) => l.length),
      ),
    ).toBe(120)
    expect(row).not.toContain('word '.repeat(40).trim())
    const piped = fakeDeps(api)
    await listNotes(piped.deps, {})
    expect(piped.stdout().split('\n')[1]).toContain(`first line ${'word '.repeat(40).trim()}  `)
  })

  it('train starts the training run of a layer and prints it; --json is the run unchanged', async () => {
    const started = run()
    const api = new FakeApi((req) => lookups(req) ?? { status: 202, body: started })
    const json = fakeDeps(api, { json: true })
    await trainMemory(json.deps, { layer: 'team', team: 'platform' })
    expect(api.sent.at(-1)).toMatchObject({
      method: 'POST',
      path: '/memory/train',
      body: { layer: 'team', teamId: teamUuid },
    })
    expect(Run.parse(JSON.parse(json.stdout()))).toEqual(started)

    const human = fakeDeps(api)
    await trainMemory(human.deps, { layer: 'enterprise' })
    expect(api.sent.at(-1)!.body).toEqual({ layer: 'enterprise' })
    expect(human.stdout()).toMatch(new RegExp(`^id\\s+${started.id}\\n`))
    expect(human.stdout()).toMatch(/task\s+os-train-memory/)
  })

  it('train refuses a team layer without --team, a team on the enterprise layer, --timeout alone', async () => {
    const api = new FakeApi(() => ({ status: 500 }))
    for (const [opts, message] of [
      [{ layer: 'team' }, '--layer team needs --team naming the team'],
      [{ layer: 'enterprise', team: 'platform' }, 'the enterprise layer takes no --team'],
      [{ layer: 'enterprise', timeout: '5' }, '--timeout goes with --wait'],
    ] as const) {
      const err = await failure(trainMemory(fakeDeps(api).deps, opts))
      expect([err.exitCode, err.message]).toEqual([exitCodes.usage, message])
    }
    expect(api.sent).toEqual([])
  })

  it('train --wait follows the run as runs start --wait does: its JSON, exit 0 once it succeeded', async () => {
    const started = run()
    const done = { ...started, status: 'succeeded' as const, finishedAt: now() }
    const api = new FakeApi((req) =>
      req.method === 'POST'
        ? { status: 202, body: started }
        : {
            body: {
              run: done,
              events: [{ id: randomUUID(), type: 'run.succeeded', payload: {}, createdAt: now() }],
              gates: [],
              task: null,
              version: null,
              previous: null,
              next: [],
            },
          },
    )
    const { deps, stdout, stderr } = fakeDeps(api)
    await trainMemory(deps, { layer: 'enterprise', wait: true })
    expect(api.sent.map((r) => `${r.method} ${r.path}`)).toEqual([
      'POST /memory/train',
      `GET /runs/${started.id}`,
    ])
    expect(Run.parse(JSON.parse(stdout()))).toEqual(done)
    expect(stderr()).toContain(`started run ${started.id} of os-train-memory`)
  })

  it('tombstone asks first: refused without --yes off a terminal, cancelled on no, sent on yes', async () => {
    const id = randomUUID()
    const api = new FakeApi(() => ({ status: 204 }))
    const refused = await failure(tombstoneNote(fakeDeps(api).deps, id, {}))
    expect(refused.exitCode).toBe(exitCodes.usage)
    expect(refused.message).toContain('refusing without --yes when not on a terminal')
    const no = await failure(tombstoneNote(fakeDeps(api, { confirm: false }).deps, id, {}))
    expect(no.message).toBe('cancelled')
    expect(api.sent).toEqual([])

    const yes = fakeDeps(api, { json: true, confirm: true })
    await tombstoneNote(yes.deps, id, {})
    expect(api.sent).toEqual([
      { method: 'POST', path: `/memory/${id}/tombstone`, query: {}, body: undefined },
    ])
    expect(JSON.parse(yes.stdout())).toEqual({ tombstoned: id })
    const flagged = fakeDeps(api)
    await tombstoneNote(flagged.deps, id, { yes: true })
    expect(flagged.stdout()).toBe(`tombstoned note ${id}\n`)

    const notAnId = await failure(tombstoneNote(fakeDeps(api).deps, 'nightly', { yes: true }))
    expect([notAnId.exitCode, notAnId.message]).toEqual([
      exitCodes.usage,
      'a note is named by its id; got "nightly"',
    ])
  })

  it('rate, resolve and dismiss send the bodies the API reads', async () => {
    const rated = note({ ratingDown: 1 })
    const item = randomUUID()
    const correction = randomUUID()
    const decision = ReviewDecision.parse({
      id: randomUUID(),
      itemId: item,
      kind: 'rated_down',
      noteId: rated.id,
      decision: 'resolved',
      correctionId: correction,
      reason: 'newer rate',
      decidedBy: 'token:x',
      decidedAt: now(),
    })
    const api = new FakeApi((req) => ({ body: req.path.endsWith('/rate') ? rated : decision }))

    const rate = fakeDeps(api)
    await rateNote(rate.deps, rated.id, 'down', { reason: 'out of date' })
    expect(api.sent.at(-1)).toMatchObject({
      path: `/memory/${rated.id}/rate`,
      body: { rating: 'down', reason: 'out of date' },
    })
    expect(rate.stdout()).toBe(`rated note ${rated.id} down: ratings +0 -1\n`)
    expect(rate.stderr()).toContain('osctl memory review')

    const resolve = fakeDeps(api, { json: true })
    await resolveItem(resolve.deps, item, { correction, reason: 'newer rate' })
    expect(api.sent.at(-1)).toMatchObject({
      path: `/memory/review/${item}/resolve`,
      body: { correctionId: correction, reason: 'newer rate' },
    })
    expect(ReviewDecision.parse(JSON.parse(resolve.stdout()))).toEqual(decision)

    await dismissItem(fakeDeps(api).deps, item, { reason: 'still true' })
    expect(api.sent.at(-1)).toMatchObject({
      path: `/memory/review/${item}/dismiss`,
      body: { reason: 'still true' },
    })
    const sent = api.sent.length
    const bad = await failure(
      resolveItem(fakeDeps(api).deps, item, { correction: 'x', reason: 'r' }),
    )
    expect(bad.exitCode).toBe(exitCodes.usage)
    expect(api.sent).toHaveLength(sent)
  })

  it("a decided item's 409 comes back as the API's error code", async () => {
    const api = new FakeApi(() => ({
      status: 409,
      body: { error: 'review_item_decided', message: 'Review item x was decided already.' },
    }))
    const err = await failure(dismissItem(fakeDeps(api).deps, randomUUID(), { reason: 'r' }))
    expect(err).toBeInstanceOf(ApiRequestError)
    expect([(err as ApiRequestError).code, err.exitCode]).toEqual([
      'review_item_decided',
      exitCodes.failed,
    ])
  })

  it('add, tasks memory train and ask go to the task routes, by slug; "-" reads the note from stdin', async () => {
    const written = note()
    const asked = MemoryAsk.parse({
      question: 'when do invoices arrive?',
      notes: [{ ...written, score: 0.6 }].map(
        ({ id, layer, taskId, teamId, text, kind, source, score }) => ({
          id,
          layer,
          taskId,
          teamId,
          text,
          kind,
          source,
          score,
        }),
      ),
    })
    const api = new FakeApi(
      (req) =>
        lookups(req) ?? {
          status: req.method === 'POST' ? 201 : 200,
          body: req.method === 'POST' ? written : asked,
        },
    )
    const corrects = randomUUID()
    await addNote(fakeDeps(api, { stdin: 'A long lesson\nover lines\n' }).deps, 'nightly', '-', {
      corrects,
    })
    expect(api.sent.at(-1)).toMatchObject({
      method: 'POST',
      path: `/tasks/${taskUuid}/memory`,
      body: { text: 'A long lesson\nover lines', correctsId: corrects },
    })
    const empty = await failure(addNote(fakeDeps(api, { stdin: ' \n' }).deps, 'nightly', '-', {}))
    expect([empty.exitCode, empty.message]).toEqual([exitCodes.usage, 'the note is empty'])

    const trained = fakeDeps(api, { json: true })
    await trainTaskNote(trained.deps, 'nightly', 'Reports go out in CET', { layer: 'team' })
    expect(api.sent.at(-1)).toMatchObject({
      path: `/tasks/${taskUuid}/memory/train`,
      body: { text: 'Reports go out in CET', layer: 'team' },
    })
    expect(MemoryNote.parse(JSON.parse(trained.stdout()))).toEqual(written)

    const ask = fakeDeps(api)
    await askMemory(ask.deps, 'when do invoices arrive?', { task: 'nightly', limit: '5' })
    expect(api.sent.at(-1)).toMatchObject({
      method: 'GET',
      path: `/tasks/${taskUuid}/memory/ask`,
      query: { q: 'when do invoices arrive?', limit: '5' },
    })
    expect(ask.stdout()).toMatch(
      /^SCORE\s+LAYER\s+KIND\s+TEXT\s+ID\n0\.600\s+task\s+note\s+EU invoices/,
    )
    expect(ask.stderr()).toBe('recalled for: when do invoices arrive?\n')

    await askTaskMemory(fakeDeps(api).deps, 'nightly', undefined, {})
    expect(api.sent.at(-1)!.query).toEqual({})
  })

  it("memory ask QUESTION without a task searches the enterprise's memory, best match first (issue 27)", async () => {
    const found = [note({ layer: 'enterprise', taskId: null }), note()]
    const api = new FakeApi(() => ({ body: { notes: found, page: 1, limit: 2, total: 3 } }))
    const asked = fakeDeps(api)
    await askMemory(asked.deps, 'when do invoices arrive?', { limit: '2' })
    expect(api.sent).toEqual([
      {
        method: 'GET',
        path: '/memory',
        query: { q: 'when do invoices arrive?', limit: '2' },
        body: undefined,
      },
    ])
    const [header, ...rows] = asked.stdout().trimEnd().split('\n')
    expect(header).toMatch(/^ID\s+LAYER\s+OWNER\s+TEXT\s+RATINGS\s+RECALLS$/)
    expect(rows.map((r) => r.split(' ')[0])).toEqual(found.map((n) => n.id))
    expect(asked.stderr()).toBe(
      "searched the enterprise's memory for: when do invoices arrive?\n" +
        '2 of 3 notes that match: --limit N for more\n',
    )
    const json = fakeDeps(api, { json: true })
    await askMemory(json.deps, 'invoices', {})
    expect(NotePage.parse(JSON.parse(json.stdout())).notes).toEqual(found)
    const empty = await failure(askMemory(fakeDeps(api).deps, '  ', {}))
    expect([empty.exitCode, empty.message]).toEqual([exitCodes.usage, 'the question is empty'])
  })

  it('review prints the queue from its {items, ...} page', async () => {
    const reviewed = note()
    const page = ReviewPage.parse({
      items: [
        {
          id: randomUUID(),
          kind: 'rated_down',
          status: 'open',
          note: reviewed,
          correction: null,
          reason: 'out of date',
          createdAt: now(),
          decidedAt: null,
        },
      ],
      page: 1,
      limit: 25,
      total: 1,
    })
    const api = new FakeApi(() => ({ body: page }))
    const { deps, stdout, stderr } = fakeDeps(api)
    await listReview(deps, {})
    expect(stdout()).toMatch(/^ID\s+KIND\s+NOTE\s+WHY\s+NOTE ID\s+CREATED\n/)
    expect(stdout()).toContain(
      `${page.items[0]!.id}  rated_down  EU invoices arrive after 06:00 UTC  out of date  ${reviewed.id}`,
    )
    expect(stderr()).toBe('')
  })

  it('impact asks for the notes by lift and prints lift, rates and recalls (issue 31)', async () => {
    const helped = note({
      text: 'Reconcile before closing',
      recalls: 31,
      impact: {
        recalledRuns: 24,
        succeeded: 21,
        failed: 3,
        successRate: 0.875,
        baseRate: 0.6,
        lift: 0.275,
      },
    })
    const unknown = note({ text: 'New rule', recalls: 2 })
    const api = new FakeApi(
      (req) => lookups(req) ?? { body: { notes: [helped, unknown], page: 1, limit: 25, total: 2 } },
    )
    const human = fakeDeps(api)
    await noteImpact(human.deps, { layer: 'task', task: 'nightly' })
    expect(api.sent.at(-1)).toMatchObject({
      method: 'GET',
      path: '/memory',
      query: { sort: 'impact', layer: 'task', taskId: taskUuid },
    })
    const [header, first, second] = human.stdout().trimEnd().split('\n')
    expect(header).toMatch(/^LIFT\s+SUCCESS\s+BASE\s+RECALLS\s+LAYER\s+TEXT\s+ID$/)
    expect(first).toMatch(
      new RegExp(
        `^\\+27\\.5\\s+88% of 24\\s+60%\\s+31\\s+task\\s+Reconcile before closing\\s+${helped.id}$`,
      ),
    )
    expect(second).toMatch(new RegExp(`^-\\s+-\\s+-\\s+2\\s+task\\s+New rule\\s+${unknown.id}$`))
    const json = fakeDeps(api, { json: true })
    await noteImpact(json.deps, { all: true })
    expect(api.sent.at(-1)!.query).toMatchObject({ sort: 'impact', page: '1' })
    expect(MemoryNote.array().parse(JSON.parse(json.stdout()))).toEqual([helped, unknown])
  })

  it('list passes --sort and --expired; extend sends validUntil, or null with --forever', async () => {
    const extended = note({ validUntil: '2027-06-30T00:00:00.000Z' })
    const api = new FakeApi((req) =>
      req.method === 'PATCH'
        ? { body: extended }
        : { body: { notes: [], page: 1, limit: 25, total: 0 } },
    )
    await listNotes(fakeDeps(api).deps, { sort: 'recalls', expired: true })
    expect(api.sent.at(-1)!.query).toEqual({ sort: 'recalls', expired: 'true' })
    const out = fakeDeps(api)
    await extendNote(out.deps, extended.id, { until: '2027-06-30T00:00:00Z' })
    expect(api.sent.at(-1)).toMatchObject({
      method: 'PATCH',
      path: `/memory/${extended.id}`,
      body: { validUntil: '2027-06-30T00:00:00Z' },
    })
    expect(out.stdout()).toBe(`note ${extended.id} holds until 2027-06-30T00:00:00.000Z\n`)
    await extendNote(fakeDeps(api).deps, extended.id, { forever: true })
    expect(api.sent.at(-1)!.body).toEqual({ validUntil: null })
    for (const opts of [{}, { until: 'x', forever: true }]) {
      const err = await failure(extendNote(fakeDeps(api).deps, extended.id, opts))
      expect([err.exitCode, err.message]).toEqual([
        exitCodes.usage,
        'give --until TIME or --forever',
      ])
    }
  })
})

describe('osctl memory against a daemon', () => {
  let env: Record<string, string>
  let json: CliDaemon['json']

  beforeAll(async () => {
    const cli = await startCliDaemon('Memory Cli')
    env = cli.env
    json = cli.json
    await json(['teams', 'create', '--name', 'Platform'])
    await json([
      'tasks',
      'create',
      '--name',
      'Nightly',
      '--kind',
      'deterministic',
      '--role',
      'ceo',
      '--team',
      'platform',
      '--goal',
      'Summarise the EU invoices of the day',
    ])
  })

  it('adds, lists, asks and tombstones notes, by task slug', async () => {
    const invoices = MemoryNote.parse(
      await json(['memory', 'add', 'nightly', 'EU invoices arrive after 06:00 UTC']),
    )
    expect(invoices).toMatchObject({ layer: 'task', kind: 'note', status: 'active' })
    const team = MemoryNote.parse(
      await json([
        'tasks',
        'memory',
        'train',
        'nightly',
        'Platform reports go out in CET',
        '--layer',
        'team',
      ]),
    )
    expect(team).toMatchObject({ layer: 'team', taskId: null })
    const other = MemoryNote.parse(
      await json(['tasks', 'memory', 'add', 'nightly', 'Refunds need a second pair of eyes']),
    )

    const page = NotePage.parse(await json(['memory', 'list', '--task', 'nightly']))
    expect(page.notes.map((n) => n.id).sort()).toEqual([invoices.id, other.id].sort())
    expect(page).toMatchObject({ page: 1, total: 2 })
    const all = MemoryNote.array().parse(await json(['memory', 'list', '--all', '--limit', '1']))
    expect(all.map((n) => n.id).sort()).toEqual([invoices.id, team.id, other.id].sort())
    expect(
      MemoryNote.array()
        .parse(await json(['memory', 'list', '--all', '--layer', 'team', '--team', 'platform']))
        .map((n) => n.id),
    ).toEqual([team.id])

    const table = await osctl(['memory', 'list', '--q', 'invoices'], env)
    expect(table.exitCode, table.stderr).toBe(0)
    const [header, ...rows] = table.stdout.trimEnd().split('\n')
    expect(header).toMatch(/^ID\s+LAYER\s+OWNER\s+TEXT\s+RATINGS\s+RECALLS$/)
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatch(
      new RegExp(
        `^${invoices.id}\\s+task\\s+${invoices.taskId}\\s+EU invoices arrive after 06:00 UTC\\s+\\+0 -0\\s+0$`,
      ),
    )

    const asked = MemoryAsk.parse(
      await json(['memory', 'ask', 'when do invoices arrive', '--task', 'nightly']),
    )
    expect(asked.notes[0]).toMatchObject({ id: invoices.id, layer: 'task' })
    // Without a task: the enterprise's memory, every layer, no task needed.
    const searched = NotePage.parse(await json(['memory', 'ask', 'invoices']))
    expect(searched.notes.map((n) => n.id)).toEqual([invoices.id])
    const byGoal = MemoryAsk.parse(await json(['tasks', 'memory', 'ask', 'nightly']))
    expect(byGoal.question).toBe('Summarise the EU invoices of the day')

    const memory = TaskMemory.parse(await json(['tasks', 'memory', 'list', 'nightly']))
    expect(memory.notes.map((n) => n.id).sort()).toEqual([invoices.id, other.id].sort())
    expect(memory.grants.write).toContain('team')

    expect(MemoryNote.parse(await json(['memory', 'get', other.id])).text).toBe(other.text)
    const unasked = await osctl(['memory', 'tombstone', other.id], env)
    expect([unasked.exitCode, unasked.stderr]).toEqual([
      2,
      `error: Tombstone note ${other.id}: never answered or recalled again: refusing without --yes when not on a terminal\n`,
    ])
    expect(await json(['memory', 'tombstone', other.id, '--yes'])).toEqual({ tombstoned: other.id })
    const gone = await osctl(['memory', 'get', other.id], env)
    expect(gone.exitCode).toBe(1)
    expect(gone.stderr).toContain('note_not_found')
    expect(
      NotePage.parse(await json(['memory', 'list', '--task', 'nightly'])).notes.map((n) => n.id),
    ).toEqual([invoices.id])
  })

  it('rates a note down, lists it for review, dismisses it, and shows the decision in history', async () => {
    const noteId = MemoryNote.parse(
      await json(['memory', 'add', 'nightly', 'Invoices are in USD']),
    ).id
    const rated = MemoryNote.parse(
      await json(['memory', 'rate', noteId, 'down', '--reason', 'they are in EUR']),
    )
    expect(rated.ratingDown).toBe(1)

    const review = ReviewPage.parse(await json(['memory', 'review']))
    const item = review.items.find((i) => i.note.id === noteId)!
    expect(item).toMatchObject({ kind: 'rated_down', status: 'open', reason: 'they are in EUR' })

    const decision = ReviewDecision.parse(
      await json(['memory', 'dismiss', item.id, '--reason', 'true for the US entity']),
    )
    expect(decision).toMatchObject({ itemId: item.id, decision: 'dismissed', noteId })
    const again = await osctl(['memory', 'dismiss', item.id, '--reason', 'twice'], env)
    expect(again.exitCode).toBe(1)
    expect(again.stderr).toContain('review_item_decided')

    const history = ReviewHistoryPage.parse(await json(['memory', 'history']))
    expect(history.decisions[0]).toEqual(decision)
    const table = await osctl(['memory', 'history'], env)
    expect(table.stdout).toMatch(/^DECIDED\s+DECISION\s+KIND\s+REASON\s+BY\s+NOTE/)
    expect(table.stdout).toContain('dismissed')
    expect(ReviewPage.parse(await json(['memory', 'review'])).items.map((i) => i.id)).not.toContain(
      item.id,
    )

    const health = RecallHealth.parse(await json(['memory', 'health']))
    expect(health.runs.failed).toBe(0)
  })

  it('impact lists notes by lift; a near-duplicate is refused; a note expires and is extended (issue 31)', async () => {
    const note = MemoryNote.parse(
      await json([
        'memory',
        'add',
        'nightly',
        'The Lisbon office closes early on Fridays',
        '--valid-until',
        new Date(Date.now() + 86_400_000).toISOString(),
      ]),
    )
    expect(note).toMatchObject({ expired: false, impact: { recalledRuns: 0, lift: null } })
    const dup = await osctl(
      ['memory', 'add', 'nightly', 'the lisbon office closes early on fridays'],
      env,
    )
    expect(dup.exitCode).toBe(1)
    expect(dup.stderr).toContain('note_duplicate')
    expect(dup.stderr).toContain(note.id)

    const impact = NotePage.parse(await json(['memory', 'impact', '--task', 'nightly']))
    expect(impact.notes.map((n) => n.id)).toContain(note.id)
    const table = await osctl(['memory', 'impact', '--layer', 'task'], env)
    expect(table.exitCode, table.stderr).toBe(0)
    expect(table.stdout).toMatch(/^LIFT\s+SUCCESS\s+BASE\s+RECALLS\s+LAYER\s+TEXT\s+ID\n/)
    expect(table.stdout).toContain('The Lisbon office closes early on Fridays')

    const past = await osctl(
      ['memory', 'extend', note.id, '--until', new Date(Date.now() - 60_000).toISOString()],
      env,
    )
    expect(past.exitCode).toBe(1)
    expect(past.stderr).toContain('invalid_request')
    const forever = MemoryNote.parse(await json(['memory', 'extend', note.id, '--forever']))
    expect(forever).toMatchObject({ id: note.id, validUntil: null, expired: false })
  })
})

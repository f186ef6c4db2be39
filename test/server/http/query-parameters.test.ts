import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { ErrorBody } from '../../../shared/schemas/common.js'
import { RunDetail } from '../../../shared/schemas/runs.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { deterministicTask } from '../../helpers/runs.js'

// Issue 51 item 14: numeric query parameters are integers in the document, with their bounds, so a
// generated client sends `waitSeconds: 5`; a value out of bounds or not a whole number is refused 400
// naming the parameter, except where the spec brings it inside (Limits: page and page size). And the
// long-poll of a finished run answers at once.

let t: TestApp
beforeAll(async () => {
  t = await createTestApp()
})

type Parameter = {
  name: string
  in: string
  schema: { type?: string; minimum?: number; maximum?: number }
}
type Document = { paths: Record<string, Record<string, { parameters?: Parameter[] }>> }

/** The names of the numeric query parameters, and their bounds as the spec or DESIGN states them. */
const numeric: Record<string, { min: number; max?: number }> = {
  page: { min: 1 },
  failedPage: { min: 1 },
  limit: { min: 1 },
  pageSize: { min: 1, max: 200 },
  waitSeconds: { min: 0, max: 30 },
  after: { min: 0 },
}

function expectRefused(res: { status: number; body: unknown }, parameter: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(400)
  const body = ErrorBody.parse(res.body)
  expect(body.error).toBe('invalid_request')
  expect(body.message).toContain(parameter)
  expect((res.body as { issues: { field: string }[] }).issues.map((i) => i.field)).toEqual([
    parameter,
  ])
}

describe('numeric query parameters', () => {
  it('are integers with their bounds in the document, in every operation', async () => {
    const doc = (await t.call('GET', '/v1/openapi.json', { token: null })).body as Document
    const seen: string[] = []
    for (const [path, operations] of Object.entries(doc.paths))
      for (const [method, operation] of Object.entries(operations))
        for (const p of operation.parameters ?? []) {
          if (p.in !== 'query' || !numeric[p.name]) continue
          const where = `${method.toUpperCase()} ${path} ${p.name}`
          seen.push(where)
          expect(p.schema.type, where).toBe('integer')
          expect(p.schema.minimum, where).toBe(numeric[p.name]!.min)
          expect(p.schema.maximum, where).toBeTypeOf('number')
          if (numeric[p.name]!.max) expect(p.schema.maximum, where).toBe(numeric[p.name]!.max)
          // No other query parameter is an integer under another name without this list knowing.
        }
    // The paged lists, the memory lists, blockers, the long-polls and the event feed.
    expect(seen).toEqual(
      expect.arrayContaining([
        'GET /v1/runs/{id} waitSeconds',
        'GET /v1/chats/{id} waitSeconds',
        'GET /v1/chats/{id} limit',
        'GET /v1/events waitSeconds',
        'GET /v1/events limit',
        'GET /v1/events after',
        'GET /v1/runs limit',
        'GET /v1/tasks page',
        'GET /v1/memory limit',
        'GET /v1/tasks/{id}/memory/ask limit',
        'GET /v1/blockers pageSize',
      ]),
    )
    expect(seen.length).toBeGreaterThanOrEqual(30)
    const integers = Object.values(doc.paths)
      .flatMap((ops) => Object.values(ops))
      .flatMap((op) => op.parameters ?? [])
      .filter((p) => p.in === 'query' && p.schema.type === 'integer')
    expect(integers.every((p) => numeric[p.name])).toBe(true)
  })

  const id = randomUUID()
  const waits: [string, string][] = [
    ['GET /v1/runs/{id}', `/v1/runs/${id}?afterEventId=${randomUUID()}&`],
    ['GET /v1/chats/{id}', `/v1/chats/${id}?afterMessageId=${randomUUID()}&`],
    ['GET /v1/events', '/v1/events?'],
  ]
  it.each(waits)('%s: waitSeconds out of 0..30 or not a whole number is 400', async (_, base) => {
    for (const value of ['31', '-1', '2.5', 'abc', '1e1', '99999999999999999999', '0x10'])
      expectRefused(await t.call('GET', `${base}waitSeconds=${value}`), 'waitSeconds')
  })

  const limits: [string, number, string][] = [
    ['GET /v1/chats/{id}', 200, `/v1/chats/${id}?`],
    ['GET /v1/events', 200, '/v1/events?'],
    ['GET /v1/tasks/{id}/memory/ask', 50, `/v1/tasks/${id}/memory/ask?`],
  ]
  it.each(limits)('%s: limit out of 1..%i or not a whole number is 400', async (_, max, base) => {
    for (const value of ['0', String(max + 1), '-1', '2.5', 'ten', '1.0'])
      expectRefused(await t.call('GET', `${base}limit=${value}`), 'limit')
  })

  it('the event feed refuses an after= that is not a position', async () => {
    for (const value of ['-1', 'x', '1.5'])
      expectRefused(await t.call('GET', `/v1/events?after=${value}`), 'after')
    expect((await t.call('GET', '/v1/events?after=0&limit=1&waitSeconds=0')).status).toBe(200)
  })

  it('a paged list refuses a page or limit that is not a whole number, and brings a number inside (spec: Limits)', async () => {
    for (const [name, value] of [
      ['limit', 'abc'],
      ['limit', '2.5'],
      ['page', 'x'],
      ['page', '1e3'],
    ] as const)
      expectRefused(await t.call('GET', `/v1/runs?${name}=${value}`), name)
    expect((await t.call('GET', '/v1/runs?limit=1000')).body.limit).toBe(200)
    expect((await t.call('GET', '/v1/runs?limit=0&page=-3')).body).toMatchObject({
      limit: 1,
      page: 1,
    })
    expect((await t.call('GET', '/v1/runs?limit=&page=')).body).toMatchObject({
      limit: 25,
      page: 1,
    })
    expectRefused(await t.call('GET', '/v1/blockers?pageSize=many'), 'pageSize')
    expect((await t.call('GET', '/v1/blockers?pageSize=500')).body.failed.limit).toBe(200)
  })

  it('takes the numbers in range as they are', async () => {
    const task = await deterministicTask(t)
    expect((await t.call('GET', `/v1/tasks/${task.id}/memory/ask?limit=50`)).status).toBe(200)
    expect((await t.call('GET', '/v1/runs?limit=7&page=2')).body).toMatchObject({
      limit: 7,
      page: 2,
    })
    expect((await t.call('GET', '/v1/events?limit=200&waitSeconds=0')).status).toBe(200)
  })
})

describe('the long-poll of a finished run', () => {
  it('answers at once, whatever waitSeconds asks', async () => {
    const task = await deterministicTask(t)
    const started = await t.call('POST', `/v1/tasks/${task.id}/runs`, { body: {} })
    expect(started.status, JSON.stringify(started.body)).toBe(201)
    const runId = started.body.id as string
    expect((await t.call('POST', `/v1/runs/${runId}/cancel`, { body: {} })).status).toBe(200)
    const before = RunDetail.parse((await t.call('GET', `/v1/runs/${runId}`)).body)
    expect(before.run.status).toBe('cancelled')
    const last = before.events.at(-1)!.id

    const clock = performance.now()
    const res = await t.call('GET', `/v1/runs/${runId}?afterEventId=${last}&waitSeconds=20`)
    const ms = performance.now() - clock
    expect(res.status).toBe(200)
    expect(RunDetail.parse(res.body)).toMatchObject({ run: { status: 'cancelled' }, events: [] })
    // It answered in some milliseconds here; before, it held the whole 20 s. 5 s leaves a loaded,
    // single slow core room without letting the old behaviour pass.
    expect(ms).toBeLessThan(5_000)
  })
})

import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { beforeAll, describe, expect, it } from 'vitest'
import { allScopes, levelFor, resourceOf } from '../../../shared/scopes.js'
import { createSql } from '../../../server/db/sql.js'
import { createApp } from '../../../server/http/app.js'
import { revokeToken } from '../../../server/domain/people/index.js'
import { createTestApp, silentLog, type TestApp } from '../../helpers/app.js'
import { createTestDatabase } from '../../helpers/db.js'
import { deterministicTask } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { ErrorBody } from '../../../shared/schemas/common.js'

let t: TestApp
beforeAll(async () => {
  t = await createTestApp()
})

/** A run of the task started with `raw` as its body, sent as JSON and as written. */
const startRaw = (taskId: string, raw: string | undefined) =>
  t.call('POST', `/v1/tasks/${taskId}/runs`, {
    raw,
    headers: { 'content-type': 'application/json' },
  })

describe('GET /v1/health', () => {
  it('answers ok and the package version without a token', async () => {
    const res = await t.call('GET', '/v1/health', { token: null })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ status: 'ok', version: t.config.version })
  })

  it('answers 503 degraded when the database does not answer', async () => {
    const dead = createSql('postgres://osd:x@127.0.0.1:1/none', { max: 1 })
    const app = createApp({ sql: dead, config: t.config, log: silentLog, sealer: t.sealer })
    const res = await app.request('/v1/health')
    await t.expectDocumented('GET', '/v1/health', res)
    expect(res.status).toBe(503)
    expect(await res.json()).toEqual({ status: 'degraded', version: t.config.version })
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/)
    await dead.end({ timeout: 0 })
  })
})

describe('authentication (spec: Authentication 1-5)', () => {
  it('answers 401 in the framework shape without a token', async () => {
    const res = await t.call('GET', '/v1/enterprise/concurrency', { token: null })
    expect(res.status).toBe(401)
    expect(res.body).toEqual({ message: 'Unauthorized', error: 'Unauthorized', statusCode: 401 })
  })

  it('answers 401 for a malformed authorization header and an unknown token', async () => {
    for (const headers of [{ authorization: 'Basic abc' }, { authorization: 'Bearer nope' }]) {
      const res = await t.call('GET', '/v1/enterprise/concurrency', { token: null, headers })
      expect(res.status).toBe(401)
    }
  })

  it('answers 401 for a revoked token as soon as the revocation is announced', async () => {
    const token = await t.tokenWith(['enterprise:read'])
    expect((await t.call('GET', '/v1/enterprise/concurrency', { token })).status).toBe(200) // now cached
    const [row] = await t.sql<{ id: string }[]>`
      select id from api_tokens where enterprise_id = ${t.acme.id} order by created_at desc limit 1`
    await revokeToken(t.sql, t.acme.id, row!.id)
    // The cache is dropped by the NOTIFY of the revoking transaction: milliseconds, not its 5 s TTL.
    await eventually(
      async () => (await t.call('GET', '/v1/enterprise/concurrency', { token })).status === 401,
      1000,
    )
  })

  it('reaches a token made after a refusal of it (refusals are not cached)', async () => {
    const res = await t.call('GET', '/v1/enterprise/concurrency', { token: 'osd_not_yet' })
    expect(res.status).toBe(401)
    const token = await t.tokenWith(['enterprise:read'])
    expect((await t.call('GET', '/v1/enterprise/concurrency', { token })).status).toBe(200)
  })

  it('derives the scope from the path: read for GET, write otherwise', async () => {
    const reader = await t.tokenWith(['enterprise:read'])
    expect((await t.call('GET', '/v1/enterprise/metrics', { token: reader })).status).toBe(200)
    const res = await t.call('PATCH', '/v1/enterprise/metrics', {
      token: reader,
      body: { metrics: [] },
    })
    expect(res.status).toBe(403)
    expect(res.body).toMatchObject({ error: 'api_token_scope', needed: 'enterprise:write' })
    expect(res.body.message).toContain('enterprise:write')
    expect(res.body.message).toContain('enterprise:read')
  })

  it("keeps a token to its own enterprise's settings", async () => {
    await t.call('PATCH', '/v1/enterprise/concurrency', {
      token: t.other.token,
      body: { concurrentRunLimit: 77 },
    })
    const mine = await t.call('GET', '/v1/enterprise/concurrency')
    expect(mine.body.concurrentRunLimit).not.toBe(77)
  })
})

describe('portal-only routes (spec: Authentication 6-7)', () => {
  it.each([
    ['GET', '/v1/enterprise/api-tokens', 'api_token_cannot_manage_tokens'],
    ['POST', '/v1/enterprise/api-tokens', 'api_token_cannot_manage_tokens'],
    ['DELETE', `/v1/enterprise/api-tokens/${randomUUID()}`, 'api_token_cannot_manage_tokens'],
    ['PATCH', `/v1/enterprise/api-tokens/${randomUUID()}`, 'api_token_cannot_manage_tokens'],
    ['POST', `/v1/enterprise/api-tokens/${randomUUID()}/rotate`, 'api_token_cannot_manage_tokens'],
    ['GET', '/v1/enterprise/connections', 'api_token_cannot_manage_connections'],
    ['DELETE', '/v1/enterprise/connections/x', 'api_token_cannot_manage_connections'],
    ['GET', '/v1/users', 'api_token_scope'],
    ['GET', '/v1/enterprises', 'api_token_scope'],
    ['GET', '/v1/auth/me', 'api_token_scope'],
    ['POST', '/v1/auth/enterprise', 'api_token_scope'],
    ['POST', '/v1/auth/logout', 'api_token_scope'],
    ['GET', '/v1/consent/enterprises', 'api_token_scope'],
    ['POST', '/v1/consent/approve', 'api_token_scope'],
  ])('%s %s refuses a token holding every scope: %s', async (method, path, code) => {
    const res = await t.call(method, path, { body: {} })
    expect(res.status).toBe(403)
    expect(res.body.error).toBe(code)
  })

  it('answers api_token_scope first to a token with no enterprise scope', async () => {
    const token = await t.tokenWith(allScopes.filter((s) => !s.startsWith('enterprise:')))
    for (const path of ['/v1/enterprise/api-tokens', '/v1/enterprise/connections']) {
      const res = await t.call('GET', path, { token })
      expect(res.status).toBe(403)
      expect(res.body.error).toBe('api_token_scope')
    }
  })

  it('does not take /v1/enterprise for /v1/enterprises', async () => {
    expect((await t.call('GET', '/v1/enterprise/concurrency')).status).toBe(200)
  })
})

describe('request bodies (spec: Common conventions, Limits)', () => {
  const big = JSON.stringify({ metrics: ['x'.repeat(110 * 1024)] })

  it('answers 413 for a body over 100 KB with a content-length', async () => {
    const res = await t.call('PATCH', '/v1/enterprise/metrics', {
      raw: big,
      headers: { 'content-type': 'application/json', 'content-length': String(big.length) },
    })
    expect(res.status).toBe(413)
    expect(res.body.error).toBe('body_too_large')
  })

  it('answers 413 for a streamed body over 100 KB without a content-length', async () => {
    const chunks = [big.slice(0, 60_000), big.slice(60_000)]
    const stream = new ReadableStream({
      pull(controller) {
        const next = chunks.shift()
        if (next) controller.enqueue(new TextEncoder().encode(next))
        else controller.close()
      },
    })
    const res = await t.app.request('/v1/enterprise/metrics', {
      method: 'PATCH',
      headers: { authorization: `Bearer ${t.acme.token}`, 'content-type': 'application/json' },
      body: stream,
      // undici needs this for a streamed request body
      duplex: 'half',
    })
    await t.expectDocumented('PATCH', '/v1/enterprise/metrics', res)
    expect(res.status).toBe(413)
  })

  it('takes a body of just under 100 KB', async () => {
    const metrics = Array.from({ length: 50 }, (_, i) => `${i}`.padEnd(190, 'm'))
    const res = await t.call('PATCH', '/v1/enterprise/metrics', { body: { metrics } })
    expect(res.status).toBe(200)
  })

  it('reads bodies the same from node own request under a real listener (issue 30)', async () => {
    // osd serve reads a body from node's request, not through Hono's web stream: the same rules there.
    const server = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' })
    await new Promise<void>((resolve) => server.once('listening', () => resolve()))
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const send = async (
      method: string,
      path: string,
      body: string | ReadableStream | undefined,
      headers = {},
    ) => {
      const res = await fetch(`${origin}${path}`, {
        method,
        headers: { authorization: `Bearer ${t.acme.token}`, ...headers },
        body,
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
      } as RequestInit)
      return { status: res.status, body: (await res.json()) as Record<string, any> }
    }
    const json = { 'content-type': 'application/json' }
    const limit = (await t.call('GET', '/v1/enterprise/concurrency')).body.concurrentRunLimit
    try {
      const task = await deterministicTask(t)
      const input = { s: 'é'.repeat(20_000) + '€'.repeat(10_000) } // multi-byte text across chunks
      const taken = await send('POST', `/v1/tasks/${task.id}/runs`, JSON.stringify(input), json)
      expect(taken.status).toBe(201)
      expect(taken.body.input).toEqual(input)
      // No engine runs it here: cancelled, so the member is free for the tests after this one.
      expect((await t.call('POST', `/v1/runs/${taken.body.id}/cancel`)).status).toBe(200)

      const declared = await send('PATCH', '/v1/enterprise/metrics', big, {
        ...json,
        'content-length': String(Buffer.byteLength(big)),
      })
      expect(declared).toMatchObject({ status: 413, body: { error: 'body_too_large' } })
      // Not JSON, and too large: refused on what it says of itself, unread.
      const plain = await send('PATCH', '/v1/enterprise/metrics', big, {
        'content-type': 'text/plain',
      })
      expect(plain).toMatchObject({ status: 413, body: { error: 'body_too_large' } })

      const chunks = [big.slice(0, 60_000), big.slice(60_000)]
      const stream = new ReadableStream({
        pull(controller) {
          const next = chunks.shift()
          if (next) controller.enqueue(new TextEncoder().encode(next))
          else controller.close()
        },
      })
      const streamed = await send('PATCH', '/v1/enterprise/metrics', stream, json)
      expect(streamed).toMatchObject({ status: 413, body: { error: 'body_too_large' } })

      const broken = await send(
        'PATCH',
        '/v1/enterprise/concurrency',
        '{"concurrentRunLimit": ',
        json,
      )
      expect(broken).toMatchObject({ status: 400, body: { error: 'invalid_json' } })
      // The connection still serves the next request after a refused body.
      const after = await send(
        'PATCH',
        '/v1/enterprise/concurrency',
        '{"concurrentRunLimit": 7}',
        json,
      )
      expect(after).toMatchObject({ status: 200, body: { concurrentRunLimit: 7 } })
      const empty = await send('POST', '/v1/enterprise/webhook-secret/rotate', '', json)
      expect(empty.status).toBe(200)
    } finally {
      await t.call('PATCH', '/v1/enterprise/concurrency', { body: { concurrentRunLimit: limit } })
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('answers a form-encoded body 400 invalid_json "must be JSON", not taken for none (issue 51)', async () => {
    // `curl -d region=eu` sends a form: it started a run with an empty input.
    const task = (
      await t.call('POST', '/v1/tasks', {
        body: { name: `Form ${Date.now()}`, kind: 'deterministic', assigneeRole: 'ceo' },
      })
    ).body
    const form = { 'content-type': 'application/x-www-form-urlencoded' }
    const res = await t.call('POST', `/v1/tasks/${task.id}/runs`, {
      raw: 'region=eu',
      headers: form,
    })
    expect(res.status).toBe(400)
    expect(ErrorBody.parse(res.body)).toEqual({
      error: 'invalid_json',
      message:
        'The body must be JSON, sent with content-type: application/json; this one is application/x-www-form-urlencoded.',
    })
    // The same under a real listener, where osd reads node's own request (a content-length).
    const server = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' })
    await new Promise<void>((resolve) => server.once('listening', () => resolve()))
    try {
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const served = await fetch(`${origin}/v1/tasks/${task.id}/runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t.acme.token}`, ...form },
        body: 'region=eu',
      })
      expect(served.status).toBe(400)
      expect(((await served.json()) as { error: string }).error).toBe('invalid_json')
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
    const runs = await t.call('GET', `/v1/runs?taskId=${task.id}`)
    expect(runs.body.total).toBe(0)
    // A form's content-type with no body is no body: the input is {}.
    const empty = await t.call('POST', `/v1/tasks/${task.id}/runs`, { raw: '', headers: form })
    expect(empty.status).toBe(201)
    expect(empty.body.input).toEqual({})
    expect((await t.call('POST', `/v1/runs/${empty.body.id}/cancel`)).status).toBe(200)
  })

  it('answers a task slug where its id belongs 404, saying a task is named by its id (issue 51)', async () => {
    const res = await t.call('POST', '/v1/tasks/nightly-report/runs', { body: {} })
    expect(res.status).toBe(404)
    expect(ErrorBody.parse(res.body)).toEqual({
      error: 'task_not_found',
      message:
        'No task has the id "nightly-report" in this enterprise: a task is named by its id (a UUID) here; find it by slug with GET /v1/tasks?slug=nightly-report.',
    })
    const run = await t.call('GET', '/v1/runs/last-one')
    expect(run.status).toBe(404)
    expect(run.body.message).toBe(
      'No run has the id "last-one" in this enterprise: a run is named by its id (a UUID) here.',
    )
  })

  it('answers 400 invalid_json for a body that is not JSON', async () => {
    const res = await t.call('PATCH', '/v1/enterprise/concurrency', {
      raw: '{"concurrentRunLimit": ',
      headers: { 'content-type': 'application/json' },
    })
    expect(res.status).toBe(400)
    expect(res.body.error).toBe('invalid_json')
  })

  it('answers 400 invalid_json for a body holding \\u0000 or half a surrogate pair, which PostgreSQL cannot store', async () => {
    const task = (
      await t.call('POST', '/v1/tasks', {
        body: { name: `Nul ${Date.now()}`, kind: 'deterministic', assigneeRole: 'ceo' },
      })
    ).body
    // The refusal names the field (a key that holds one, with U+FFFD in its place).
    for (const [raw, field] of [
      ['{"s": "a\\u0000b"}', 's'],
      ['{"a\\u0000": 1}', 'a\ufffd'],
      ['{"deep": [{"x": ["\\u0000"]}]}', 'deep[0].x[0]'],
      ['{"s": "\\ud800"}', 's'],
      ['{"s": "x\\uDC00y"}', 's'],
      ['{"ok": "\\ud83d\\ude00", "\\udbff": 1}', '\ufffd'],
      ['{"s": "\\udc00\\ud800"}', 's'],
    ]) {
      const res = await startRaw(task.id, raw)
      expect(res.status, raw).toBe(400)
      expect(res.body).toEqual({
        error: 'invalid_json',
        message: `The request body holds \\u0000 or an unpaired surrogate (\\ud800-\\udfff) at ${field}, which cannot be stored.`,
      })
    }
    // A backslash followed by u0000 is plain text, and is stored.
    const text = await startRaw(task.id, '{"s": "a\\\\u0000b"}')
    expect(text.status).toBe(201)
    expect(text.body.input).toEqual({ s: 'a\\u0000b' })
    // A whole pair, escaped or not, is a character like any other.
    const pair = await startRaw(task.id, '{"s": "\\ud83d\\ude00 \u{1F600}"}')
    expect(pair.status).toBe(409) // the task's lane is busy with the run above: stored and decided
    expect(pair.body.error).toBe('overlap')
  })

  it('answers 400 invalid_json naming the field for a number past what JSON.parse reads (it was stored as null)', async () => {
    const task = await deterministicTask(t)
    for (const [raw, field] of [
      ['{"n": 1e400}', 'n'],
      ['{"deep": [{"x": [1, -1E+999]}]}', 'deep[0].x[1]'],
      [`{"big": ${'9'.repeat(400)}}`, 'big'],
    ]) {
      const res = await startRaw(task.id, raw)
      expect(res.status, raw).toBe(400)
      expect(res.body).toEqual({
        error: 'invalid_json',
        message: `The request body holds a number past ±1.8e308, which cannot be read, at ${field}.`,
      })
    }
    // A large exponent within the range, and one so small it reads as 0, are numbers like any other.
    const fine = await startRaw(task.id, '{"n": 1.5e308, "m": 1e-400, "s": "1e400"}')
    expect(fine.status, fine.text).toBe(201)
    expect(fine.body.input).toEqual({ n: 1.5e308, m: 0, s: '1e400' })
  })

  it('answers a webhook body holding an unpaired surrogate 400 with the right secret, 401 with a wrong one', async () => {
    const hook = (secret: string) =>
      t.call('POST', `/v1/webhooks/${t.acme.slug}/tasks/nothing`, {
        token: null,
        raw: '{"a": "\\ud800"}',
        headers: { 'content-type': 'application/json', 'x-os-webhook-secret': secret },
      })
    const { secret } = (await t.call('POST', '/v1/enterprise/webhook-secret/rotate')).body
    const read = await hook(secret)
    expect(read.status).toBe(400)
    expect(read.body.error).toBe('invalid_json')
    // A wrong secret is refused before the body is read (issue 44).
    expect((await hook('whsec_wrong')).status).toBe(401)
  })

  it('answers a list filtered by a malformed id with nothing, not an error (a layer id: 400)', async () => {
    for (const bad of ['not-an-id', '-'.repeat(36)]) {
      for (const path of [
        `/v1/tasks?teamId=${bad}`,
        `/v1/runs?taskId=${bad}`,
        `/v1/runs?taskVersionId=${bad}`,
        `/v1/executions?teamId=${bad}`,
        `/v1/gates?runId=${bad}`,
        `/v1/plans?producedByRunId=${bad}`,
      ]) {
        const res = await t.call('GET', path)
        expect(res.status, path).toBe(200)
        expect(Array.isArray(res.body) ? res.body : res.body.data, path).toEqual([])
      }
      // A layer's id names the owner of a setting, by the rule bodies follow too (domain/tasks/layers.ts):
      // not a UUID, it is refused (test/server/routes/layers.test.ts).
      for (const path of [
        `/v1/llm/bindings?layer=team&layerId=${bad}`,
        `/v1/tools/bindings?layer=team&layerId=${bad}`,
      ]) {
        const res = await t.call('GET', path)
        expect(res.status, path).toBe(400)
        expect(res.body.error).toBe('invalid_request')
      }
    }
  })

  it('answers 400 invalid_request naming the parameter for a query value holding U+0000', async () => {
    for (const [path, param] of [
      ['/v1/runs?status=%00', 'status'],
      ['/v1/tasks?status=%00', 'status'],
      ['/v1/tasks?slug=a%00', 'slug'],
      ['/v1/tasks?name=%00', 'name'],
      ['/v1/tasks?origin=%00', 'origin'],
      ['/v1/executions?status=%00', 'status'],
      ['/v1/executions/board?status=%00', 'status'],
      ['/v1/gates?kind=%00', 'kind'],
      ['/v1/plans?status=%00', 'status'],
      ['/v1/webhooks?status=%00', 'status'],
      ['/v1/tools/bindings?layer=%00', 'layer'],
      ['/v1/llm/bindings?layer=%00', 'layer'],
    ] as const) {
      const res = await t.call('GET', path)
      expect(res.status, path).toBe(400)
      expect(res.body.error).toBe('invalid_request')
      expect(res.body.issues).toEqual([{ field: param, message: expect.any(String) }])
      expect(res.body.message).toContain(param)
    }
    const del = await t.call('DELETE', '/v1/llm/bindings?layer=%00&provider=provider_a')
    expect(del.status).toBe(400)
    expect(del.body.issues.map((i: { field: string }) => i.field)).toEqual(['layer'])
  })

  it('reads a query parameter given twice once, the first, and ignores name[] and name[key]', async () => {
    const task = (
      await t.call('POST', '/v1/tasks', {
        body: { name: `Twice ${Date.now()}`, kind: 'deterministic', assigneeRole: 'ceo' },
      })
    ).body
    const slugs = async (query: string) =>
      (await t.call('GET', `/v1/tasks?${query}`)).body.data.map((x: { slug: string }) => x.slug)
    expect(await slugs(`slug=${task.slug}&slug=nothing`)).toEqual([task.slug])
    expect(await slugs(`slug=nothing&slug=${task.slug}`)).toEqual([])
    expect((await t.call('GET', `/v1/tasks?slug=${task.slug}&slug=%00`)).status).toBe(200)
    const all = (await t.call('GET', '/v1/tasks')).body.total
    for (const query of [`slug[]=${task.slug}`, `slug[a]=${task.slug}`, 'slug[]=%00']) {
      const res = await t.call('GET', `/v1/tasks?${query}`)
      expect(res.status, query).toBe(200)
      expect(res.body.total, query).toBe(all)
    }
  })

  it('answers a path id holding U+0000 as any id naming nothing: its not-found code', async () => {
    for (const [path, code] of [
      ['/v1/tasks/%00', 'task_not_found'],
      ['/v1/runs/a%00b', 'run_not_found'],
      [`/v1/tasks/${randomUUID()}/versions/%00`, 'version_not_found'],
      ['/v1/webhooks/%00', 'delivery_not_found'],
    ] as const) {
      const res = await t.call('GET', path)
      expect(res.status, path).toBe(404)
      expect(res.body.error, path).toBe(code)
    }
  })

  it('answers 400 invalid_json for a body nested deeper than 100 levels, and takes 100', async () => {
    const task = await deterministicTask(t)
    const nested = (levels: number) => '{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1)
    for (const raw of [nested(101), nested(5000), '['.repeat(5000) + ']'.repeat(5000)]) {
      const res = await startRaw(task.id, raw)
      expect(res.status).toBe(400)
      expect(res.body.error).toBe('invalid_json')
    }
    // Brackets inside strings are text, not depth.
    const text = await t.call('POST', `/v1/tasks/${task.id}/runs`, {
      body: { s: '{['.repeat(300), t: '\\"{'.repeat(200) },
    })
    expect(text.status, text.text).toBe(201)
    const deepest = await t.call('POST', `/v1/tasks/${task.id}/runs`, {
      raw: nested(100),
      headers: { 'content-type': 'application/json' },
    })
    expect(deepest.status).toBe(409) // read and stored; the lane is busy with the run above
    expect(deepest.body.error).toBe('overlap')
  })

  it('does not read a body as JSON without content-type application/json: refused as not JSON', async () => {
    // fetch() sends a string as text/plain unless told: said, not read as no body (issue 51).
    const res = await t.call('PATCH', '/v1/enterprise/concurrency', {
      raw: '{"concurrentRunLimit": 5}',
      headers: { 'content-type': 'text/plain;charset=UTF-8' },
    })
    expect(res.status).toBe(400)
    expect(res.body).toEqual({
      error: 'invalid_json',
      message:
        'The body must be JSON, sent with content-type: application/json; this one is text/plain.',
    })
  })

  it('reads application/json with a charset', async () => {
    const res = await t.call('PATCH', '/v1/enterprise/concurrency', {
      raw: '{"concurrentRunLimit": 5}',
      headers: { 'content-type': 'application/json; charset=utf-8' },
    })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ concurrentRunLimit: 5 })
  })
})

describe('methods (DESIGN 4)', () => {
  it('answers a method a path does not have 405 with Allow, before authentication', async () => {
    for (const [method, path, allow] of [
      ['PUT', `/v1/enterprise/api-tokens/${randomUUID()}`, 'DELETE, OPTIONS, PATCH'],
      ['POST', '/v1/enterprise/connections', 'GET, HEAD, OPTIONS'],
      ['PUT', '/v1/tasks', 'GET, HEAD, OPTIONS, POST'],
      ['DELETE', '/v1/health', 'GET, HEAD, OPTIONS'],
      // Two paths match: the static one and the one with an id; both offer GET only.
      ['POST', '/v1/chats/unread', 'GET, HEAD, OPTIONS'],
    ] as const) {
      for (const token of [t.acme.token, null]) {
        const res = await t.call(method, path, { token, body: {} })
        expect(res.status, `${method} ${path}`).toBe(405)
        expect(res.headers.get('allow')).toBe(allow)
        expect(res.body).toEqual({
          message: 'Method Not Allowed',
          error: 'Method Not Allowed',
          statusCode: 405,
        })
      }
    }
  })

  it('answers OPTIONS 204 with Allow and no body, without a token', async () => {
    for (const [path, allow] of [
      ['/v1/health', 'GET, HEAD, OPTIONS'],
      [`/v1/tasks/${randomUUID()}`, 'DELETE, GET, HEAD, OPTIONS'],
      ['/v1/enterprise/concurrency', 'GET, HEAD, OPTIONS, PATCH'],
    ] as const) {
      const res = await t.call('OPTIONS', path, { token: null })
      expect(res.status, path).toBe(204)
      expect(res.headers.get('allow')).toBe(allow)
      expect(res.text).toBe('')
    }
  })

  it('answers HEAD where GET is, without a body', async () => {
    const res = await t.call('HEAD', '/v1/health', { token: null })
    expect(res.status).toBe(200)
    expect(res.text).toBe('')
  })

  it('leaves a path no operation has to the 401 and 404 it answered before', async () => {
    expect((await t.call('OPTIONS', '/v1/nothing-here', { token: null })).status).toBe(401)
    expect((await t.call('OPTIONS', '/v1/nothing-here')).status).toBe(404)
  })
})

describe('errors', () => {
  it('answers an unknown route 404 in the framework shape', async () => {
    for (const path of ['/v1/nothing-here', '/v1/enterprise/nothing', '/elsewhere']) {
      const res = await t.call('GET', path)
      expect(res.status).toBe(404)
      expect(res.body).toEqual({ message: 'Not Found', error: 'Not Found', statusCode: 404 })
    }
  })

  it('answers an unexpected failure 500 without stack, SQL or names of the schema', async () => {
    const broken = await createTestDatabase()
    await broken.sql`alter table enterprises rename column concurrent_run_limit to run_limit_gone`
    const app = createApp({ sql: broken.sql, config: t.config, log: silentLog, sealer: t.sealer })
    const [ent] = await broken.sql`
      insert into enterprises (slug, name, webhook_secret_hash, webhook_secret_last_chars)
      values ('b', 'B', '\\x00', 'xxxx') returning id`
    const token = 'osd_broken_' + randomUUID()
    const { createHash } = await import('node:crypto')
    await broken.sql`
      insert into api_tokens (enterprise_id, name, scopes, token_hash, last_chars)
      values (${ent!.id}, 't', ${broken.sql.array(allScopes)}, ${createHash('sha256').update(token).digest()}, 'xxxx')`
    const res = await app.request('/v1/enterprise/concurrency', {
      headers: { authorization: `Bearer ${token}` },
    })
    await t.expectDocumented('GET', '/v1/enterprise/concurrency', res)
    expect(res.status).toBe(500)
    const text = await res.text()
    expect(JSON.parse(text)).toEqual({
      statusCode: 500,
      message: 'Internal server error',
      error: 'Internal Server Error',
    })
    expect(text).not.toMatch(/concurrent_run_limit|select|at \w+ \(/i)
  })

  it('answers 503 database_unavailable with Retry-After, not 500, while the database is away', async () => {
    // As with DATABASE_URL naming a server that is down: nothing listens on port 1.
    const dead = createSql('postgres://osd:x@127.0.0.1:1/none', { max: 1 })
    const app = createApp({ sql: dead, config: t.config, log: silentLog, sealer: t.sealer })
    // The token is looked up in the database first (authentication), then the route reads it.
    for (const [method, path] of [
      ['GET', '/v1/tasks'],
      ['POST', '/v1/webhooks/acme/tasks/nothing'],
    ] as const) {
      const res = await app.request(path, {
        method,
        headers: { authorization: `Bearer ${t.acme.token}`, 'content-type': 'application/json' },
        ...(method === 'POST' ? { body: '{}' } : {}),
      })
      await t.expectDocumented(method, path, res)
      expect(res.status, path).toBe(503)
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/)
      expect(res.headers.get('x-request-id')).toBeTruthy()
      expect(await res.json()).toEqual({
        error: 'database_unavailable',
        message: expect.any(String),
      })
    }
    await dead.end({ timeout: 0 })
  })

  it('sends a request id with every answer', async () => {
    const res = await t.call('GET', '/v1/health', { token: null })
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/)
  })
})

describe('GET /v1/openapi.json', () => {
  it('is an OpenAPI 3.1 document of every route, served without a token', async () => {
    const res = await t.call('GET', '/v1/openapi.json', { token: null })
    expect(res.status).toBe(200)
    expect(res.body.openapi).toBe('3.1.0')
    expect(res.body.info.version).toBe(t.config.version)
    expect(Object.keys(res.body.paths)).toEqual(
      expect.arrayContaining([
        '/v1/health',
        '/v1/enterprise/concurrency',
        '/v1/enterprise/webhook-secret/rotate',
      ]),
    )
    const patch = res.body.paths['/v1/enterprise/concurrency'].patch
    expect(patch.requestBody.content['application/json'].schema).toBeDefined()
    // A token or a session secret as bearer, or the session cookie with its CSRF header on a change.
    expect(patch.security).toEqual([{ bearer: [] }, { session: [], csrf: [] }])
    expect(res.body.paths['/v1/enterprise/concurrency'].get.security).toEqual([
      { bearer: [] },
      { session: [] },
    ])
    expect(res.body.components.securitySchemes.session).toMatchObject({
      type: 'apiKey',
      in: 'cookie',
      name: 'osd_session',
    })
    expect(res.body.components.securitySchemes.csrf).toMatchObject({
      type: 'apiKey',
      in: 'header',
      name: 'x-osd-csrf',
    })
    expect(res.body.paths['/v1/health'].get.security).toEqual([])
    // The inbound webhooks take the enterprise's webhook secret instead, and say what a wrong one answers.
    const hook = res.body.paths['/v1/webhooks/{enterprise}/tasks/{task}'].post
    expect(hook.security).toEqual([{ webhookSecret: [] }])
    expect(res.body.components.securitySchemes.webhookSecret).toMatchObject({
      in: 'header',
      name: 'x-os-webhook-secret',
    })
    expect(hook.responses['401'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/FrameworkError',
    })
    expect(res.body.info.description).toContain('U+0000')
  })
})

// Every route the document lists gets the auth and scope rules, so a new route cannot skip them.
describe('every documented route', () => {
  it('answers 401 without a token and 403 without its scope, unless public', async () => {
    const doc = (await t.call('GET', '/v1/openapi.json', { token: null })).body
    const tokenWithout = new Map<string, string>()
    const perKind: string[] = []
    let checked = 0
    type Security = Record<string, string[]>[]
    for (const [path, ops] of Object.entries<Record<string, { security?: Security }>>(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const concrete = path.replace(/\{[^}]+\}/g, () => randomUUID())
        const verb = method.toUpperCase()
        // Public: no bearer scheme (none at all, or the webhook secret, or a consent poll token).
        if (!op.security?.some((requirement) => 'bearer' in requirement)) continue
        const anonymous = await t.call(verb, concrete, { token: null, body: {} })
        expect(anonymous.status, `${verb} ${path} without a token`).toBe(401)
        // The documents' routes ask the scope of each document's kind instead of their path's
        // (test/server/routes/config.test.ts): config is no scope, and every scope would pass.
        if (resourceOf(concrete) === 'config') {
          perKind.push(`${verb} ${path}`)
          continue
        }
        const needed = `${resourceOf(concrete)}:${levelFor(verb)}`
        if (!tokenWithout.has(needed)) {
          tokenWithout.set(needed, await t.tokenWith(allScopes.filter((s) => s !== needed)))
        }
        const refused = await t.call(verb, concrete, { token: tokenWithout.get(needed)!, body: {} })
        expect(refused.status, `${verb} ${path} without ${needed}`).toBe(403)
        expect(refused.body.error).toBe('api_token_scope')
        checked++
      }
    }
    expect(checked).toBeGreaterThan(10)
    expect(perKind.sort()).toEqual([
      'GET /v1/config',
      'POST /v1/config/apply',
      'POST /v1/config/plan',
    ])
    // Three requests for each of some 200 operations: 13 s alone on two cores, about 20 s on one.
  }, 60_000)
})

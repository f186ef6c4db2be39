import { randomBytes, randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { tracesConfig } from '../../server/config.js'
import type { Engine } from '../../server/engine/index.js'
import { createApp } from '../../server/http/app.js'
import { createLogger } from '../../server/log.js'
import {
  flushTraces,
  span,
  startTraces,
  stopTraces,
  traceLog,
  tracingOn,
} from '../../server/traces/index.js'
import { Run } from '../../shared/schemas/runs.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { modulesReadBy } from '../helpers/loaded-modules.js'
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp.js'
import { osctl, startCliDaemon } from '../helpers/osctl.js'
import {
  deterministicTask,
  keyedEnterprise,
  llmTask,
  startTestEngine,
  waitForRun,
} from '../helpers/runs.js'
import { eventually } from '../helpers/wait.js'
import { startFakeMcpServer, type FakeMcpServer } from '../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../fakes/model-provider.js'

// Traces (issue 49): osd's spans as a collector receives them over OTLP/HTTP (a receiver in this
// process, both protocols), one trace from the caller's traceparent through the run's passes before and
// after its gate, the gate's wait, the model and tool calls, on to the tool server; and off, nothing
// sent and nothing of the SDK loaded. Tracing is started and stopped by this file (traces/index.ts keeps
// it per process): the other files of the worker run without it.

let receiver: OtlpReceiver
let model: FakeModelProvider
let mcp: FakeMcpServer
let t: TestApp
let engine: Engine
/** What the file's engine logs, a line each (the log lines' test). */
const engineLines: Record<string, unknown>[] = []
const mcpToken = `mcp-token-${randomUUID()}`
const saved: Record<string, string | undefined> = {}

/** Sets the OTEL_* variables this file uses, restored after it. */
function setEnv(values: Record<string, string | undefined>) {
  for (const [key, value] of Object.entries(values)) {
    if (!(key in saved)) saved[key] = process.env[key]
    if (value === undefined) delete process.env[key]
    else process.env[key] = value
  }
}

async function traceOn(protocol: 'http/protobuf' | 'http/json') {
  setEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: protocol })
  const started = await startTraces(tracesConfig(process.env), {
    version: 'test',
    role: 'all',
    warn: () => undefined,
  })
  expect(started).toBe(true)
}

beforeAll(async () => {
  receiver = await startOtlpReceiver()
  await traceOn('http/protobuf')
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer({ token: mcpToken })
  // Made once tracing is on: the app installs the request span's middleware at its making.
  t = await createTestApp({ providerBaseUrls: { provider_a: model.url, provider_b: model.url } })
  engine = await startTestEngine(t, { log: collectingLog(engineLines) })
})
afterAll(async () => {
  await engine?.stop()
  await stopTraces(0)
  for (const [key, value] of Object.entries(saved))
    if (value === undefined) delete process.env[key]
    else process.env[key] = value
  await mcp?.close()
  await model?.close()
  await receiver?.close()
})

const hex = (bytes: number) => randomBytes(bytes).toString('hex')

/** A logger at info whose lines land in `lines`, parsed, as they are written. */
function collectingLog(lines: Record<string, unknown>[]) {
  const out = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line))
      done()
    },
  })
  return createLogger('info', out as never)
}
const merge = 'vcs.merge_pull_request'

/** The spans of one trace the receiver holds once every span ended so far is sent. */
async function traceOf(traceId: string, until: (spans: ReceivedSpan[]) => boolean) {
  let spans: ReceivedSpan[] = []
  await eventually(
    async () => {
      await flushTraces()
      spans = receiver.spans.filter((s) => s.traceId === traceId)
      return until(spans)
    },
    10_000,
    `the spans of trace ${traceId}`,
  )
  return spans
}

const named = (spans: ReceivedSpan[], name: string) => spans.filter((s) => s.name === name)

/** An enterprise with a model key, whose first team has the fake tool server bound as `vcs`. */
async function enterpriseWithTools(name: string) {
  const keyed = await keyedEnterprise(t, name)
  const [team] = (await t.call('GET', '/v1/teams', keyed.as)).body
  const bound = await t.call('POST', '/v1/tools/bindings', {
    ...keyed.as,
    body: { name: 'vcs', url: mcp.url, token: mcpToken, layer: 'team', layerId: team.id },
  })
  expect(bound.status, JSON.stringify(bound.body)).toBe(201)
  return { ...keyed, team }
}

describe('a run started with a traceparent (issue 49)', () => {
  it('is one trace: the request, the passes around its gate, the gate, the model and tool calls, the tool server', async () => {
    const { e, key, as, team } = await enterpriseWithTools('Traces')
    const task = await llmTask(
      t,
      {
        teamId: team.id,
        tools: [merge, 'vcs.echo', 'os.set_gate_summary'],
        gates: [{ tool: merge, owner: 'ceo', approval: 'specific' }],
      },
      e.token,
    )
    model.script(
      key,
      { toolCalls: [{ name: 'vcs.echo', arguments: { text: 'hello' } }] },
      { toolCalls: [{ name: merge, arguments: { repo: 'acme/traced', number: 7 } }] },
      {
        toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'merged' } }],
      },
    )

    // As a CI step sends it: the pipeline's trace and its span.
    const traceId = hex(16)
    const callerSpan = hex(8)
    const started = await t.call('POST', `/v1/tasks/${task.id}/runs`, {
      ...as,
      body: { n: 1 },
      // A vendor's state beside it, the caller's to keep: never sent on to a provider or a tool server.
      headers: { traceparent: `00-${traceId}-${callerSpan}-01`, tracestate: 'ci=stranger' },
    })
    expect(started.status).toBe(201)
    const run = Run.parse(started.body)
    expect(run.traceId).toBe(traceId)

    await waitForRun(t, run.id, ['waiting_on_gate'], 15_000, e.token)
    const [gate] = (await t.call('GET', `/v1/gates?runId=${run.id}`, as)).body
    const decided = await t.call('POST', `/v1/gates/${gate.id}/decision`, {
      ...as,
      body: { decision: 'approve' },
    })
    expect(decided.status).toBe(201)
    await waitForRun(t, run.id, ['succeeded'], 15_000, e.token)
    expect(Run.parse((await t.call('GET', `/v1/runs/${run.id}`, as)).body.run).traceId).toBe(
      traceId,
    )

    const spans = await traceOf(
      traceId,
      (s) =>
        named(s, 'run pass').some((p) => p.attributes['osd.run.status'] === 'succeeded') &&
        named(s, 'gate wait').length === 1,
    )
    // The request: a SERVER span under the caller's, named by its route template, never its path.
    const [request] = named(spans, 'POST /v1/tasks/{id}/runs')
    expect(request).toMatchObject({
      kind: 2,
      parentSpanId: callerSpan,
      attributes: {
        'http.request.method': 'POST',
        'http.route': '/v1/tasks/{id}/runs',
        'http.response.status_code': 201,
      },
    })
    expect(JSON.stringify(request!.attributes)).not.toContain(task.id)
    expect(request!.resource).toMatchObject({ 'service.name': 'osd' })

    // Its passes, before the gate and after it, children of the request that started the run.
    const passes = named(spans, 'run pass')
    expect(passes.map((p) => p.attributes['osd.run.status'])).toEqual(
      expect.arrayContaining(['waiting_on_gate', 'succeeded']),
    )
    for (const pass of passes) {
      expect(pass.parentSpanId).toBe(request!.spanId)
      expect(pass.attributes).toMatchObject({
        'osd.run.id': run.id,
        'osd.task.slug': task.slug,
        'osd.enterprise.id': e.id,
      })
    }
    const passIds = new Set(passes.map((p) => p.spanId))

    // The gate's wait, from its opening to its decision, with who decided and how.
    const [wait] = named(spans, 'gate wait')
    expect(wait!.attributes).toMatchObject({
      'osd.gate.id': gate.id,
      'osd.gate.decision': 'approve',
      'osd.gate.decided_by': expect.stringMatching(/^token:/),
      'osd.run.id': run.id,
    })
    expect(wait!.startMs).toBe(Date.parse(gate.createdAt))
    expect(wait!.parentSpanId).toBe(request!.spanId)

    // The model calls, GenAI inference spans with the tokens the provider reported, in the passes.
    const calls = model.callsWith(key)
    const inferences = spans.filter((s) => s.name.startsWith('chat '))
    expect(inferences).toHaveLength(calls.length)
    for (const [i, inference] of inferences.sort((a, b) => a.startMs - b.startMs).entries()) {
      const usage = calls[i]!.usage!
      expect(inference.kind).toBe(3)
      expect(passIds.has(inference.parentSpanId)).toBe(true)
      expect(inference.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'anthropic',
        'gen_ai.request.model': calls[i]!.body.model,
        'gen_ai.usage.input_tokens': usage.input + usage.cacheRead + usage.cacheWrite,
        'gen_ai.usage.output_tokens': usage.output,
        'gen_ai.usage.cache_read.input_tokens': usage.cacheRead,
        'gen_ai.response.finish_reasons': ['tool_use'],
        'osd.cost_usd': expect.any(Number),
      })
      expect(inference.name).toBe(`chat ${calls[i]!.body.model}`)
      // No prompt or answer without OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
      expect(inference.attributes['gen_ai.input.messages']).toBeUndefined()
      expect(inference.attributes['gen_ai.output.messages']).toBeUndefined()
      // The provider was sent the inference span's context.
      expect(calls[i]!.headers.traceparent).toBe(`00-${traceId}-${inference.spanId}-01`)
    }

    // The tool calls, as execute_tool spans; the tool server got the same trace.
    const [echo] = named(spans, 'execute_tool vcs.echo')
    expect(echo!.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'vcs.echo',
      'gen_ai.tool.call.id': expect.any(String),
      'osd.tool.source': 'mcp',
    })
    expect(passIds.has(echo!.parentSpanId)).toBe(true)
    expect(named(spans, `execute_tool ${merge}`)).toHaveLength(1)
    const tracedAtServer = mcp.traceparents.filter((h) => h?.split('-')[1] === traceId)
    expect(tracedAtServer.length).toBeGreaterThan(0)
    expect(tracedAtServer).toContain(`00-${traceId}-${echo!.spanId}-01`)
    expect(mcp.tracestates.filter((h) => h !== undefined)).toEqual([])
    expect(calls.map((c) => c.headers.tracestate).filter((h) => h !== undefined)).toEqual([])

    // Admission, the spend reservations: short spans of the run's trace.
    expect(named(spans, 'run admission').length).toBeGreaterThanOrEqual(2)
    expect(named(spans, 'spend reservation')).toHaveLength(calls.length)
  })

  it('ignores a malformed traceparent: a new trace, and the start is answered 201 as ever', async () => {
    const task = await deterministicTask(t)
    for (const header of [
      'not a traceparent',
      `00-${'0'.repeat(32)}-${hex(8)}-01`,
      `00-${hex(16).toUpperCase()}-${hex(8)}-01`,
      `00-${hex(16)}-${hex(8)}-01-extra`,
    ]) {
      const res = await t.call('POST', `/v1/tasks/${task.id}/runs`, {
        body: {},
        headers: { traceparent: header },
      })
      expect(res.status, header).toBe(201)
      const run = Run.parse(res.body)
      expect(run.traceId).toMatch(/^[0-9a-f]{32}$/)
      expect(header).not.toContain(run.traceId)
      const spans = await traceOf(run.traceId!, (s) => named(s, 'run pass').length === 1)
      const [request] = named(spans, 'POST /v1/tasks/{id}/runs')
      expect(request!.parentSpanId).toBe('')
      // Only the W3C form is stored.
      const [row] = await t.sql<{ traceParent: string }[]>`
        select trace_parent from runs where id = ${run.id}`
      expect(row!.traceParent).toMatch(new RegExp(`^00-${run.traceId}-[0-9a-f]{16}-01$`))
    }
  })

  it("makes a webhook's run part of the sender's trace", async () => {
    const task = await deterministicTask(t)
    const secret = (await t.call('POST', '/v1/enterprise/webhook-secret/rotate')).body.secret
    const traceId = hex(16)
    const hook = await t.call('POST', `/v1/webhooks/${t.acme.slug}/tasks/${task.slug}`, {
      token: null,
      body: {},
      headers: { 'x-os-webhook-secret': secret, traceparent: `00-${traceId}-${hex(8)}-01` },
    })
    expect(hook.status, JSON.stringify(hook.body)).toBe(202)
    const run = (await t.call('GET', `/v1/runs/${hook.body.runId}`)).body.run
    expect(run.traceId).toBe(traceId)
    const spans = await traceOf(traceId, (s) => named(s, 'run pass').length === 1)
    expect(named(spans, 'POST /v1/webhooks/{enterprise}/tasks/{task}')).toHaveLength(1)

    // A caller without the secret may name a trace too: 401, and no run joins it.
    const strangerTrace = hex(16)
    const refused = await t.call('POST', `/v1/webhooks/${t.acme.slug}/tasks/${task.slug}`, {
      token: null,
      body: {},
      headers: { 'x-os-webhook-secret': 'wrong', traceparent: `00-${strangerTrace}-${hex(8)}-01` },
    })
    expect(refused.status).toBe(401)
    const joined = await t.sql`
      select id from runs where trace_parent like ${`00-${strangerTrace}-%`}`
    expect(joined).toHaveLength(0)
  })

  it("makes a replay's run part of the replay request's trace, and lets no stranger replay", async () => {
    const task = await deterministicTask(t)
    const secret = (await t.call('POST', '/v1/enterprise/webhook-secret/rotate')).body.secret
    const sent = await t.call('POST', `/v1/webhooks/${t.acme.slug}/tasks/${task.slug}`, {
      token: null,
      body: { n: 1 },
      headers: { 'x-os-webhook-secret': secret },
    })
    expect(sent.status, JSON.stringify(sent.body)).toBe(202)
    const replay = (token: string, traceparent: string) =>
      t.call('POST', `/v1/webhooks/${sent.body.deliveryId}/replay`, {
        token,
        body: { idempotencyKey: randomUUID() },
        headers: { traceparent },
      })
    const runsOfTask = async () =>
      (await t.sql`select id from runs where task_id = ${task.id}`).length

    // Another enterprise's token, and a token of acme without the webhooks' write scope: nothing
    // replayed, whatever trace they name.
    const foreign = await replay(t.other.token, `00-${hex(16)}-${hex(8)}-01`)
    expect(foreign.status).toBe(404)
    expect(foreign.body.error).toBe('delivery_not_found')
    const reader = await t.tokenWith(['webhooks:read'])
    const unscoped = await replay(reader, `00-${hex(16)}-${hex(8)}-01`)
    expect(unscoped.status).toBe(403)
    expect(await runsOfTask()).toBe(1)

    // A malformed traceparent is ignored: the replay's run gets a trace of its own.
    const malformed = await replay(t.acme.token, `00-${'0'.repeat(32)}-${hex(8)}-01`)
    expect(malformed.status, JSON.stringify(malformed.body)).toBe(201)
    const own = Run.parse((await t.call('GET', `/v1/runs/${malformed.body.runId}`)).body.run)
    expect(own.traceId).toMatch(/^[0-9a-f]{32}$/)
    expect(own.traceId).not.toBe('0'.repeat(32))

    const traceId = hex(16)
    const joined = await replay(t.acme.token, `00-${traceId}-${hex(8)}-01`)
    expect(joined.status, JSON.stringify(joined.body)).toBe(201)
    const run = Run.parse((await t.call('GET', `/v1/runs/${joined.body.runId}`)).body.run)
    expect(run.traceId).toBe(traceId)
    const spans = await traceOf(traceId, (s) => named(s, 'run pass').length === 1)
    expect(named(spans, 'POST /v1/webhooks/{id}/replay')).toHaveLength(1)
  })

  it("keeps another enterprise's run and its traceId out of reach: 404", async () => {
    const task = await deterministicTask(t)
    const started = await t.call('POST', `/v1/tasks/${task.id}/runs`, {
      body: {},
      headers: { traceparent: `00-${hex(16)}-${hex(8)}-01` },
    })
    const foreign = await t.call('GET', `/v1/runs/${started.body.id}`, { token: t.other.token })
    expect(foreign.status).toBe(404)
    expect(foreign.text).not.toContain(started.body.traceId)
  })

  it('names the trace and span on each log line written inside a span, and on no other', async () => {
    const lines: Record<string, unknown>[] = []
    const log = collectingLog(lines)
    log.info('before')
    await span('a seam', {}, async ({ trace }) =>
      traceLog(log, trace).child({ runId: 'r' }).info('inside'),
    )
    log.info('after')
    const [before, inside, after] = lines
    expect(before!.trace_id).toBeUndefined()
    expect(after!.trace_id).toBeUndefined()
    expect(inside).toMatchObject({
      msg: 'inside',
      runId: 'r',
      trace_id: expect.stringMatching(/^[0-9a-f]{32}$/),
      span_id: expect.stringMatching(/^[0-9a-f]{16}$/),
    })
    const spans = await traceOf(inside!.trace_id as string, (s) => named(s, 'a seam').length === 1)
    expect(spans[0]!.spanId).toBe(inside!.span_id)
  })

  it("names the request's span on its line, and the pass's on the lines the run's pass writes", async () => {
    // The app of this file logs nowhere: one beside it on the same database, whose lines are kept.
    const lines: Record<string, unknown>[] = []
    const app = createApp({
      sql: t.sql,
      config: t.config,
      log: collectingLog(lines),
      sealer: t.sealer,
    })
    const { e, key, as } = await keyedEnterprise(t, 'Traced lines')
    const [team] = (await t.call('GET', '/v1/teams', as)).body
    // A tool server that is not there: the pass says so in a line as it connects.
    const gone = createServer()
    await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve))
    const { port } = gone.address() as AddressInfo
    await new Promise<void>((resolve) => gone.close(() => resolve()))
    const bound = await t.call('POST', '/v1/tools/bindings', {
      ...as,
      body: { name: 'gone', url: `http://127.0.0.1:${port}/mcp`, layer: 'team', layerId: team.id },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
    const task = await llmTask(t, { teamId: team.id, tools: ['gone.echo'] }, e.token)
    model.script(key, {
      toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'done' } }],
    })
    const traceId = hex(16)
    const callerSpan = hex(8)
    const res = await app.request(`/v1/tasks/${task.id}/runs`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${e.token}`,
        'content-type': 'application/json',
        traceparent: `00-${traceId}-${callerSpan}-01`,
      },
      body: JSON.stringify({ n: 1 }),
    })
    expect(res.status).toBe(201)
    const run = Run.parse(await res.json())
    await waitForRun(t, run.id, ['succeeded'], 15_000, e.token)

    const spans = await traceOf(traceId, (s) => named(s, 'run pass').length === 1)
    const [request] = named(spans, 'POST /v1/tasks/{id}/runs')
    const [pass] = named(spans, 'run pass')
    const requestLine = lines.find(
      (l) => l.msg === 'request' && l.path === `/v1/tasks/${task.id}/runs`,
    )
    expect(requestLine).toMatchObject({ trace_id: traceId, span_id: request!.spanId })
    const ofRun = (l: Record<string, unknown>) => l.runId === run.id && l.connection === 'gone'
    await eventually(() => engineLines.some(ofRun))
    const passLine = engineLines.find(ofRun)
    expect(passLine).toMatchObject({
      msg: 'tool server did not answer; its tools are left out',
      trace_id: traceId,
      span_id: pass!.spanId,
    })
  })
})

describe('a chat reply (issue 49)', () => {
  it("is a trace of its own: the reply, its recall and its model call, not the message's request", async () => {
    const { e, key, as } = await keyedEnterprise(t, 'Traced chat')
    const member = await t.call('POST', '/v1/members', { ...as, body: { name: 'Ada' } })
    expect(member.status, JSON.stringify(member.body)).toBe(201)
    const chat = await t.call('POST', '/v1/chats', { ...as, body: { memberId: member.body.id } })
    expect(chat.status, JSON.stringify(chat.body)).toBe(201)
    model.script(key, { text: 'Hello.' })
    const callerTrace = hex(16)
    const sent = await t.call('POST', `/v1/chats/${chat.body.id}/messages`, {
      token: e.token,
      body: { content: 'Hi' },
      headers: { traceparent: `00-${callerTrace}-${hex(8)}-01` },
    })
    expect(sent.status, JSON.stringify(sent.body)).toBe(201)
    let reply: ReceivedSpan | undefined
    await eventually(
      async () => {
        await flushTraces()
        reply = receiver.spans.find(
          (s) => s.name === 'chat reply' && s.attributes['osd.chat.id'] === chat.body.id,
        )
        return (
          reply !== undefined &&
          receiver.spans.some((s) => s.traceId === reply!.traceId && s.name.startsWith('chat '))
        )
      },
      15_000,
      'the reply and its model call',
    )
    expect(reply!.parentSpanId).toBe('')
    expect(reply!.traceId).not.toBe(callerTrace)
    expect(reply!.attributes).toMatchObject({ 'osd.enterprise.id': e.id })
    const spans = receiver.spans.filter((s) => s.traceId === reply!.traceId)
    const [inference] = spans.filter((s) => s.name.startsWith('chat '))
    expect(inference!.parentSpanId).toBe(reply!.spanId)
    expect(named(spans, 'memory recall')[0]?.parentSpanId).toBe(reply!.spanId)
    expect(model.callsWith(key)[0]!.headers.traceparent).toBe(
      `00-${reply!.traceId}-${inference!.spanId}-01`,
    )
  })
})

describe('osctl runs start (issue 49)', () => {
  it('sends TRACEPARENT from its environment, as CI sets it, and a malformed one not at all', async () => {
    const cli = await startCliDaemon('Traced CLI')
    const created = await fetch(`${cli.daemon.url}/tasks`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${cli.enterprise.token}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        name: 'Nightly',
        kind: 'deterministic',
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
      }),
    })
    expect(created.status).toBe(201)
    const traceId = hex(16)
    // --wait: the second start would overlap a first still under way on a loaded machine.
    const traced = await osctl(['--json', 'runs', 'start', 'nightly', '--wait'], {
      ...cli.env,
      TRACEPARENT: `00-${traceId}-${hex(8)}-01`,
    })
    expect(traced.exitCode, traced.stderr).toBe(0)
    expect(JSON.parse(traced.stdout).traceId).toBe(traceId)
    const malformed = await osctl(['--json', 'runs', 'start', 'nightly'], {
      ...cli.env,
      TRACEPARENT: `00-${traceId}-${'0'.repeat(16)}-01`,
    })
    expect(malformed.exitCode, malformed.stderr).toBe(0)
    const run = JSON.parse(malformed.stdout)
    expect(run.traceId).toMatch(/^[0-9a-f]{32}$/)
    expect(run.traceId).not.toBe(traceId)
  })
})

describe('http/json (OTEL_EXPORTER_OTLP_PROTOCOL)', () => {
  it('sends the same spans as JSON', async () => {
    await stopTraces(1000)
    await traceOn('http/json')
    const task = await deterministicTask(t)
    const traceId = hex(16)
    const res = await t.call('POST', `/v1/tasks/${task.id}/runs`, {
      body: {},
      headers: { traceparent: `00-${traceId}-${hex(8)}-01` },
    })
    expect(res.status).toBe(201)
    const spans = await traceOf(traceId, (s) => named(s, 'run pass').length === 1)
    expect(named(spans, 'POST /v1/tasks/{id}/runs')[0]!.attributes['http.route']).toBe(
      '/v1/tasks/{id}/runs',
    )
    expect(named(spans, 'run pass')[0]!.attributes['osd.run.status']).toBe('succeeded')
    expect(receiver.requests.at(-1)).toMatchObject({
      path: '/v1/traces',
      contentType: expect.stringContaining('application/json'),
    })
    expect(receiver.requests.some((r) => r.contentType.includes('x-protobuf'))).toBe(true)
  })
})

describe('a run started while tracing was off (issue 49)', () => {
  it('takes the trace of its first pass made with tracing on, and keeps it for the passes after', async () => {
    await stopTraces(1000)
    const { e, key, as, team } = await enterpriseWithTools('Traced later')
    const task = await llmTask(
      t,
      {
        teamId: team.id,
        tools: [merge, 'os.set_gate_summary'],
        gates: [{ tool: merge, owner: 'ceo', approval: 'specific' }],
      },
      e.token,
    )
    // Two gates: the pass after the first makes the run's trace, the pass after the second continues it.
    model.script(
      key,
      { toolCalls: [{ name: merge, arguments: { repo: 'acme/later', number: 1 } }] },
      { toolCalls: [{ name: merge, arguments: { repo: 'acme/later', number: 2 } }] },
      { toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'done' } }] },
    )
    const started = await t.call('POST', `/v1/tasks/${task.id}/runs`, { ...as, body: {} })
    expect(Run.parse(started.body).traceId).toBeNull()
    const runId = started.body.id as string
    const decided: string[] = []
    /** Approves the run's next gate, once it waits (the list shows waiting gates). */
    const approveNext = async () => {
      let gate: { id: string } | undefined
      await eventually(
        async () => {
          const gates = (await t.call('GET', `/v1/gates?runId=${runId}`, as)).body
          gate = gates.find((g: { id: string }) => !decided.includes(g.id))
          return gate !== undefined
        },
        15_000,
        `gate ${decided.length + 1} of the run`,
      )
      decided.push(gate!.id)
      const answer = await t.call('POST', `/v1/gates/${gate!.id}/decision`, {
        ...as,
        body: { decision: 'approve' },
      })
      expect(answer.status).toBe(201)
    }
    // Its first pass made without tracing, up to the first gate.
    await waitForRun(t, runId, ['waiting_on_gate'], 15_000, e.token)
    await traceOn('http/protobuf')
    await approveNext()
    // The second gate waits: the pass between the gates was made with tracing on.
    await approveNext()
    const traceId = Run.parse((await t.call('GET', `/v1/runs/${runId}`, as)).body.run).traceId
    expect(traceId).toMatch(/^[0-9a-f]{32}$/)
    await waitForRun(t, runId, ['succeeded'], 15_000, e.token)
    const passes = named(
      await traceOf(traceId!, (s) =>
        named(s, 'run pass').some((p) => p.attributes['osd.run.status'] === 'succeeded'),
      ),
      'run pass',
    )
    // Both passes made with tracing on, in that one trace (before: a trace for each).
    expect(passes.map((p) => p.attributes['osd.run.status']).sort()).toEqual([
      'succeeded',
      'waiting_on_gate',
    ])
    expect(passes.every((p) => p.attributes['osd.run.id'] === runId)).toBe(true)
  }, 90_000)
})

describe('content capture (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)', () => {
  it("records the prompt and the answers in the GenAI conventions' form, and no secret", async () => {
    await stopTraces(1000)
    setEnv({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' })
    onTestFinished(async () => {
      await stopTraces(1000)
      setEnv({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: undefined })
      await traceOn('http/protobuf')
    })
    await traceOn('http/protobuf')
    const { e, key, as, team } = await enterpriseWithTools('Captured')
    const task = await llmTask(t, { teamId: team.id, tools: ['vcs.echo'] }, e.token)
    model.script(
      key,
      { toolCalls: [{ name: 'vcs.echo', arguments: { text: 'hello' } }] },
      { toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'said' } }] },
    )
    const traceId = hex(16)
    const started = await t.call('POST', `/v1/tasks/${task.id}/runs`, {
      ...as,
      body: { topic: 'greetings' },
      headers: { traceparent: `00-${traceId}-${hex(8)}-01` },
    })
    expect(started.status).toBe(201)
    await waitForRun(t, started.body.id, ['succeeded'], 15_000, e.token)
    const spans = await traceOf(
      traceId,
      (s) =>
        s.filter((x) => x.name.startsWith('chat ')).length === 2 && named(s, 'run pass').length > 0,
    )
    const [, second] = spans
      .filter((s) => s.name.startsWith('chat '))
      .sort((a, b) => a.startMs - b.startMs)
    // The second call's prompt: the task's message, the model's tool call, the tool's answer; each
    // message a role and its parts (gen-ai-input-messages.json).
    const input = JSON.parse(String(second!.attributes['gen_ai.input.messages']))
    expect(input.length).toBeGreaterThanOrEqual(3)
    for (const message of input) {
      expect(message.role, JSON.stringify(message)).toMatch(/^(user|assistant|tool)$/)
      expect(Array.isArray(message.parts), JSON.stringify(message)).toBe(true)
      for (const part of message.parts) expect(typeof part.type).toBe('string')
    }
    const parts = input.flatMap((m: { parts: object[] }) => m.parts)
    expect(parts).toContainEqual(
      expect.objectContaining({
        type: 'tool_call',
        name: 'vcs.echo',
        arguments: { text: 'hello' },
      }),
    )
    const [echo] = named(spans, 'execute_tool vcs.echo')
    expect(parts).toContainEqual({
      type: 'tool_call_response',
      id: echo!.attributes['gen_ai.tool.call.id'],
      response: echo!.attributes['gen_ai.tool.call.result'],
    })
    expect(JSON.parse(String(second!.attributes['gen_ai.output.messages']))).toEqual([
      {
        role: 'assistant',
        parts: [
          {
            type: 'tool_call',
            id: expect.any(String),
            name: 'os.finish',
            arguments: { outcome: 'succeeded', summary: 'said' },
          },
        ],
        finish_reason: 'tool_use',
      },
    ])
    // Content, never a secret: neither the model key nor the tool server's token.
    const everything = JSON.stringify(spans)
    expect(everything).not.toContain(key)
    expect(everything).not.toContain(mcpToken)
  })
})

describe("the SDK's own word (issue 49)", () => {
  /** Starts tracing anew with `env` laid over this file's, answering what osd was told to log. */
  async function startedWith(env: Record<string, string>) {
    await stopTraces(1000)
    setEnv({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', ...env })
    const warnings: { message: string; fields: object }[] = []
    const started = await startTraces(tracesConfig(process.env), {
      version: 'test',
      role: 'all',
      warn: (fields, message) => void warnings.push({ message, fields }),
    })
    expect(started).toBe(true)
    return warnings
  }

  it('logs each variable the SDK cannot read, as it falls back to its default', async () => {
    // Not the sampler: one the SDK does not make stops osd at start (config.ts).
    const warnings = await startedWith({
      OTEL_BSP_MAX_QUEUE_SIZE: 'lots',
      OTEL_BSP_SCHEDULE_DELAY: 'soon',
    })
    setEnv({ OTEL_BSP_MAX_QUEUE_SIZE: undefined, OTEL_BSP_SCHEDULE_DELAY: undefined })
    const said = JSON.stringify(warnings)
    expect(said).toContain('OTEL_BSP_MAX_QUEUE_SIZE')
    expect(said).toContain('OTEL_BSP_SCHEDULE_DELAY')
  })

  it("says an export's failure in one short line, not the collector's whole answer", async () => {
    // A collector that refuses every batch with a long answer (an HTML error page, say).
    const refusing = createServer((req, res) => {
      req.resume()
      req.on('end', () => res.writeHead(400).end(`<html>${'x'.repeat(200_000)}</html>`))
    })
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => new Promise<void>((resolve) => refusing.close(() => resolve())))
    const { port } = refusing.address() as AddressInfo
    const warnings = await startedWith({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_BSP_SCHEDULE_DELAY: '10',
    })
    onTestFinished(async () => {
      await stopTraces(0)
      setEnv({ OTEL_BSP_SCHEDULE_DELAY: undefined })
      await traceOn('http/protobuf')
    })
    await span('refused', {}, async () => undefined)
    await eventually(() => warnings.length > 0, 10_000, 'a warning of the refused export')
    const [line] = warnings
    expect(line!.message).toContain('400')
    expect(JSON.stringify(line).length).toBeLessThan(1000)
  })
})

describe('tracing off (no OTLP endpoint)', () => {
  it('sends nothing, stores no trace, and sends no traceparent onward', async () => {
    await stopTraces(1000)
    expect(tracingOn()).toBe(false)
    const sent = receiver.requests.length
    const { e, key, as } = await keyedEnterprise(t, 'Untraced')
    const task = await llmTask(t, {}, e.token)
    model.script(key, { text: 'done' })
    const res = await t.call('POST', `/v1/tasks/${task.id}/runs`, {
      ...as,
      body: {},
      headers: { traceparent: `00-${hex(16)}-${hex(8)}-01` },
    })
    expect(res.status).toBe(201)
    expect(Run.parse(res.body).traceId).toBeNull()
    await waitForRun(t, res.body.id, ['succeeded'], 15_000, e.token)
    expect(model.callsWith(key)[0]!.headers.traceparent).toBeUndefined()
    await flushTraces()
    expect(receiver.requests.length).toBe(sent)
  })

  it('loads none of the SDK: importing the app and the daemon reads no @opentelemetry module', async () => {
    // In a process of its own, on the bundle bin/osd starts (npm test builds first).
    const files = await modulesReadBy('dist/server/serve.js', {
      OTEL_EXPORTER_OTLP_ENDPOINT: '',
    })
    expect(files.length).toBeGreaterThan(100)
    expect(files.filter((f) => f.includes('@opentelemetry'))).toEqual([])
  })
})

import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import SwaggerParser from '@apidevtools/swagger-parser'
import openapiTS, { astToString } from 'openapi-typescript'
import ts from 'typescript'
import { beforeAll, describe, expect, it } from 'vitest'
import { openGate } from '../../../server/domain/gates/index.js'
import { loadRun, transition } from '../../../server/domain/runs/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { llmTask } from '../../helpers/runs.js'

// The document as clients that generate code from it see it (issues 15, 32): valid OpenAPI 3.1, every
// operation named, each component name given to one schema, and the types openapi-typescript makes
// from it usable by a user's program, with openapi-fetch as its client.

interface Operation {
  operationId?: string
  responses: Record<string, { description: string; content?: Record<string, unknown> }>
}
type Document = { openapi: string; paths: Record<string, Record<string, Operation>> }

let t: TestApp
let document: Document
let operations: { where: string; op: Operation }[]

beforeAll(async () => {
  t = await createTestApp()
  document = (await t.call<Document>('GET', '/v1/openapi.json', { token: null })).body
  operations = Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ where: `${method.toUpperCase()} ${path}`, op })),
  )
})

describe('the OpenAPI document', () => {
  it('validates against the OpenAPI 3.1 schema (swagger-parser)', async () => {
    expect(document.openapi).toBe('3.1.0')
    // validate() dereferences in place: it gets a copy.
    await expect(SwaggerParser.validate(structuredClone(document) as never)).resolves.toBeDefined()
    // The same validator refuses a broken copy, so the pass above says something.
    const broken = structuredClone(document)
    delete (broken.paths['/v1/runs']!.get!.responses['200'] as { description?: string }).description
    await expect(SwaggerParser.validate(broken as never)).rejects.toThrow(/description/)
  })

  it('names every operation once, with a readable operationId', () => {
    expect(operations.length).toBeGreaterThan(100)
    const ids = operations.map(({ where, op }) => {
      expect(op.operationId, where).toMatch(/^[a-z][A-Za-z0-9]+$/)
      return op.operationId
    })
    const twice = ids.filter((id, i) => ids.indexOf(id) !== i)
    expect(twice, 'operationIds declared more than once').toEqual([])
    const byWhere = Object.fromEntries(operations.map(({ where, op }) => [where, op.operationId]))
    expect(byWhere).toMatchObject({
      'GET /v1/runs': 'listRuns',
      'POST /v1/tasks/{id}/runs': 'startTaskRun',
      'POST /v1/gates/{id}/decision': 'decideGate',
      'POST /v1/webhooks/{id}/replay': 'replayWebhookDelivery',
      'GET /v1/openapi.json': 'getOpenApiDocument',
    })
  })

  it('declares a 4xx answer for every operation that takes a token or input', () => {
    // Health, its two probes and this document take no token, no parameter and no body: nothing a
    // caller sends can be refused, so they declare no 4xx rather than one they never answer. Any other
    // operation must.
    const without4xx = operations
      .filter(({ op }) => !Object.keys(op.responses).some((status) => /^4\d\d$/.test(status)))
      .map(({ op }) => op.operationId)
    expect(without4xx.sort()).toEqual([
      'getHealth',
      'getLiveness',
      'getOpenApiDocument',
      'getReadiness',
    ])
    // Health's other answer is its 503 degraded, in the same shape as its 200.
    const health = document.paths['/v1/health']!.get!.responses
    expect(health['503']?.content).toEqual(health['200']?.content)
  })

  it('gives each schema a name of its own: a gate, spend, and a task’s gate rule and spend limits', () => {
    const schemas = (document as unknown as { components: { schemas: Record<string, any> } })
      .components.schemas
    expect(Object.keys(schemas.Gate.properties)).toEqual(
      expect.arrayContaining(['kind', 'status', 'decision', 'runId', 'chatId']),
    )
    expect(Object.keys(schemas.Spend.properties).sort()).toEqual([
      'caps',
      'day',
      'enabled',
      'today',
    ])
    expect(Object.keys(schemas.GateRule.properties).sort()).toEqual(['approval', 'owner', 'tool'])
    expect(Object.keys(schemas.SpendLimits.properties).sort()).toEqual([
      'maxModelTier',
      'model',
      'moneyUsdPerRun',
    ])
    expect(schemas.VersionDefinition.properties.gates.items).toEqual({
      $ref: '#/components/schemas/GateRule',
    })
    const answer = (path: string, method: string, status: number) =>
      document.paths[path]![method]!.responses[status]?.content?.['application/json']
    for (const [path, method, status] of [
      ['/v1/gates', 'get', 200],
      ['/v1/gates/{id}', 'get', 200],
      ['/v1/gates/{id}/decision', 'post', 201],
      ['/v1/gates/chat/{chatId}/decision', 'post', 201],
    ] as const)
      expect(JSON.stringify(answer(path, method, status)), `${method} ${path}`).toContain(
        '#/components/schemas/Gate"',
      )
    for (const [path, method] of [
      ['/v1/spend', 'get'],
      ['/v1/spend/caps', 'patch'],
      ['/v1/spend/enabled', 'patch'],
    ] as const)
      expect(answer(path, method, 200)).toEqual({ schema: { $ref: '#/components/schemas/Spend' } })
  })

  it('declares a repeat’s 200, and the 401 of the inbound webhooks', () => {
    for (const path of ['/v1/runs/{id}/retry', '/v1/webhooks/{id}/replay']) {
      const responses = document.paths[path]!.post!.responses
      expect(Object.keys(responses)).toEqual(expect.arrayContaining(['200', '201']))
      expect(responses['200']!.content).toEqual(responses['201']!.content)
    }
    for (const path of [
      '/v1/webhooks/{enterprise}/tasks/{task}',
      '/v1/webhooks/{enterprise}/gates/{gateId}',
    ])
      expect(document.paths[path]!.post!.responses['401']).toBeDefined()
  })

  it('lists the error codes each operation answers, per status', () => {
    const refusal = document.paths['/v1/tasks/{id}/runs']!.post!.responses['409']!
    expect(refusal.content).toEqual({
      'application/json': {
        schema: {
          allOf: [
            { $ref: '#/components/schemas/Error' },
            {
              type: 'object',
              properties: { error: { type: 'string', enum: ['member_busy', 'overlap'] } },
              required: ['error'],
            },
          ],
        },
      },
    })
  })

  it('declares what the middleware answers: a bad or large body, and the database away', () => {
    const missing = operations.flatMap(({ where, op }) => {
      const declared = new Set(Object.keys(op.responses))
      const wanted = op.operationId === 'getOpenApiDocument' ? [] : ['503']
      if ((op as { requestBody?: unknown }).requestBody) wanted.push('400', '413')
      return wanted.filter((status) => !declared.has(status)).map((status) => `${where} ${status}`)
    })
    expect(missing).toEqual([])
  })
})

// A user's program, written against the generated types as its author would: start a run, read it.
// Renaming startTaskRun or getRun, or dropping a field read here from Run or RunDetail, breaks it.
const client = `
import type { operations, paths } from './osd-api.js'

type StartRun = paths['/v1/tasks/{id}/runs']['post']
type RunInput = StartRun['requestBody']['content']['application/json']
type Started = StartRun['responses'][201]['content']['application/json']
type Refusal = operations['startTaskRun']['responses'][409]['content']['application/json']
type GetRun = operations['getRun']
type RunDetail = GetRun['responses'][200]['content']['application/json']

export async function startAndRead(
  base: string,
  token: string,
  taskId: StartRun['parameters']['path']['id'],
  input: RunInput,
): Promise<string> {
  const headers = { authorization: 'Bearer ' + token, 'content-type': 'application/json' }
  const start = await fetch(base + '/v1/tasks/' + taskId + '/runs', {
    method: 'POST',
    headers,
    body: JSON.stringify(input),
  })
  if (start.status === 409) {
    const refusal = (await start.json()) as Refusal
    throw new Error(refusal.error + ': ' + (refusal.message ?? ''))
  }
  const run = (await start.json()) as Started
  // Numeric query parameters are integers in the document (issue 51): the client passes a number.
  const query: NonNullable<GetRun['parameters']['query']> = { waitSeconds: 5 }
  const search = new URLSearchParams({ waitSeconds: String(query.waitSeconds) })
  const read = await fetch(base + '/v1/runs/' + run.id + '?' + search, { headers })
  const detail = (await read.json()) as RunDetail
  const finished: string | null = detail.run.finishedAt
  // Comparing with a status the schema does not list would not compile.
  const state = detail.run.status === 'waiting_on_gate' ? 'at a gate' : detail.run.status
  // @ts-expect-error: the generated types are precise, not any (a field that does not exist fails)
  void detail.run.noSuchField
  return [detail.run.id, state, finished, detail.events.length, detail.cost.usdCents].join(' ')
}

void startAndRead('http://localhost:8080', 'osd_token', '0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10', {
  ticket: 42,
})
`

// A second program, on openapi-fetch: it reads what the document once described with another
// resource's shape (a gate, a run's gates, spend) and a chat with its messages and a memory note. Each
// read is typed by the generated paths alone; a field of the wrong schema (a task's gate rule where a
// gate is, a task's spend limits where the enterprise's spend is) does not compile. It is then run
// against the app, each answer held against the document on the way.
const reader = `
import createClient from 'openapi-fetch'
import type { components, paths } from './osd-api.js'

type Gate = components['schemas']['Gate']

export interface Ids {
  taskId: string
  runId: string
  gateId: string
  chatId: string
}

export async function readAll(fetcher: (request: Request) => Promise<Response>, token: string, ids: Ids) {
  const osd = createClient<paths>({
    baseUrl: 'http://osd.test',
    fetch: fetcher,
    headers: { authorization: 'Bearer ' + token },
  })

  // Gates: the list, one, its decision, and the refusal of a second decision.
  const waiting = await osd.GET('/v1/gates', { params: { query: { runId: ids.runId } } })
  if (!waiting.data) throw new Error('listGates: ' + waiting.response.status)
  const listed: Gate | undefined = waiting.data[0]
  const one = await osd.GET('/v1/gates/{id}', { params: { path: { id: ids.gateId } } })
  if (!one.data) throw new Error('getGate: ' + one.response.status)
  const kind: 'tool' | 'question' = one.data.kind
  const status: 'waiting' | 'decided' = one.data.status
  const tool: string | null = one.data.tool
  const decided = await osd.POST('/v1/gates/{id}/decision', {
    params: { path: { id: ids.gateId } },
    body: { decision: 'approve', note: 'Go ahead.' },
  })
  if (!decided.data) throw new Error('decideGate: ' + decided.response.status)
  const decision: 'approve' | 'reject' | 'request_changes' | null = decided.data.decision
  const again = await osd.POST('/v1/gates/{id}/decision', {
    params: { path: { id: ids.gateId } },
    body: { decision: 'reject' },
  })
  const refusal = again.error && !('statusCode' in again.error) ? again.error.error : undefined
  // @ts-expect-error overlap is not a code deciding a gate answers: the document lists them
  const notACode: NonNullable<typeof refusal> = 'overlap'

  // The run with its gates: the gate a person decides, as the gates routes answer it.
  const run = await osd.GET('/v1/runs/{id}', { params: { path: { id: ids.runId } } })
  if (!run.data) throw new Error('getRun: ' + run.response.status)
  const runGates: Gate[] = run.data.gates
  const runGate = run.data.gates[0]
  const runGateDecision = runGate ? runGate.decision + ' by ' + runGate.decidedBy : 'none'

  // Spend: a cap set, and the enterprise's day read back.
  const capped = await osd.PATCH('/v1/spend/caps', {
    body: { layer: 'enterprise', moneyCentsDay: 12345 },
  })
  if (!capped.data) throw new Error('setSpendCap: ' + capped.response.status)
  const spend = await osd.GET('/v1/spend')
  if (!spend.data) throw new Error('getSpend: ' + spend.response.status)
  const day: string = spend.data.day
  const enabled: boolean = spend.data.enabled
  const caps = spend.data.caps.map((cap) => cap.layer + ':' + cap.moneyCentsDay)
  // @ts-expect-error the enterprise's spend is not a task's spend limits
  void spend.data.moneyUsdPerRun

  // A chat with its messages.
  const chat = await osd.GET('/v1/chats/{id}', { params: { path: { id: ids.chatId } } })
  if (!chat.data) throw new Error('getChat: ' + chat.response.status)
  const messages = chat.data.messages.map((message) => message.role + ': ' + message.content)
  const chatStatus: 'open' | 'closed' = chat.data.status

  // A memory note, written and read back.
  const written = await osd.POST('/v1/tasks/{id}/memory', {
    params: { path: { id: ids.taskId } },
    body: { text: 'Customers in Lyon want invoices in French.' },
  })
  if (!written.data) throw new Error('addTaskMemoryNote: ' + written.response.status)
  const note = await osd.GET('/v1/memory/{id}', { params: { path: { id: written.data.id } } })
  if (!note.data) throw new Error('getMemoryNote: ' + note.response.status)
  const layer: 'task' | 'team' | 'enterprise' = note.data.layer
  const evidence: string[] = note.data.evidence.map((e) => e.runId)

  return {
    gate: { listed: listed?.id, kind, status, tool, decision, refusal, notACode },
    run: { gates: runGates.map((g) => g.id), decided: runGateDecision },
    spend: { day, enabled, caps },
    chat: { messages, status: chatStatus },
    note: { layer, text: note.data.text, evidence, status: note.data.status },
  }
}
`

/**
 * Type-checks `roots` (written to `dir`) as a user's strict project would, in one program (the
 * generated types, most of the work, checked once for all), with TypeScript 7's compiler as the
 * build does, in a process of its own: this file took 15% less CPU than with TypeScript 5.9's API
 * (issue 40). Answers each root's diagnostics, those of the files they share with every root.
 */
function typeCheck(dir: string, roots: string[]): Map<string, string[]> {
  const compilerOptions = {
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    noUnusedLocals: true,
    target: 'es2022',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    // fetch from the DOM library: the programs need nothing from node_modules but openapi-fetch.
    lib: ['es2023', 'dom', 'dom.iterable'],
    types: [],
    noEmit: true,
    // The libraries are TypeScript's own; the generated types (a .ts file) are still checked.
    skipLibCheck: true,
  }
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: roots }))
  const run = spawnSync(
    process.execPath,
    [resolve('node_modules/typescript-native/bin/tsc'), '-p', '.', '--pretty', 'false'],
    // Run in `dir`, tsc names each file relative to it: `client.ts(1,7): ...`.
    { cwd: dir, encoding: 'utf8' },
  )
  if (run.error) throw run.error
  // `file(line,col): error TS1234: text`, the text's further lines indented under it.
  const said: { file: string; text: string }[] = []
  for (const line of run.stdout.split('\n')) {
    const head = /^(.+?)\((\d+),\d+\): error TS\d+: (.*)$/.exec(line)
    if (head) said.push({ file: head[1]!, text: `${head[1]}:${head[2]} ${head[3]}` })
    else if (line.trim() && said.length) said[said.length - 1]!.text += `\n${line.trim()}`
    else if (line.trim()) said.push({ file: '', text: line.trim() })
  }
  if (run.status !== 0 && said.length === 0) throw new Error(`tsc: ${run.stderr || run.stdout}`)
  return new Map(
    roots.map((root) => [
      root,
      said.filter((d) => d.file === root || !roots.includes(d.file)).map((d) => d.text),
    ]),
  )
}

describe('a client generated with openapi-typescript', () => {
  let dir: string
  let diagnostics: Map<string, string[]>
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'osd-openapi-client-'))
    await writeFile(
      join(dir, 'osd-api.ts'),
      astToString(await openapiTS(structuredClone(document) as never)),
    )
    await writeFile(join(dir, 'package.json'), '{ "type": "module" }')
    // openapi-fetch, from this repository's dependencies, as a user's project installs it.
    await symlink(resolve('node_modules'), join(dir, 'node_modules'), 'dir')
    await writeFile(join(dir, 'client.ts'), client)
    await writeFile(join(dir, 'reader.ts'), reader)
    diagnostics = typeCheck(dir, ['client.ts', 'reader.ts'])
    return () => rm(dir, { recursive: true, force: true })
  })

  it('type-checks a program that starts a run and reads it', () => {
    expect(diagnostics.get('client.ts')).toEqual([])
  })

  it('reads a gate, a run with its gates, spend, a chat with its messages and a memory note (openapi-fetch)', async () => {
    expect(diagnostics.get('reader.ts')).toEqual([])

    // What it reads: a run waiting at a gate, a chat with a message, a task to note something on.
    const task = await llmTask(t)
    const started = await t.call('POST', `/v1/tasks/${task.id}/runs`, { body: { ticket: 7 } })
    expect(started.status).toBe(201)
    const gate = await t.sql.begin(async (tx) => {
      const queued = await loadRun(tx, t.acme.id, started.body.id, true)
      const running = await transition(tx, queued, 'running')
      return openGate(tx, running, { kind: 'tool', tool: 'os.mail_send', journalStep: 1 })
    })
    const member = await t.call('POST', '/v1/members', { body: { name: 'Reader Ada' } })
    const chat = await t.call('POST', '/v1/chats', { body: { memberId: member.body.id } })
    const said = 'Which invoices are late?'
    await t.call('POST', `/v1/chats/${chat.body.id}/messages`, { body: { content: said } })

    const js = ts.transpileModule(reader, {
      compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
    }).outputText
    await writeFile(join(dir, 'reader.mjs'), js)
    const { readAll } = await import(pathToFileURL(join(dir, 'reader.mjs')).href)
    const contract = await t.contract()
    const checked: string[] = []
    const fetcher = async (request: Request) => {
      const sent = request.clone()
      // fetch, not request: request() takes a Request only when it is an instance of the global
      // Request, which @hono/node-server replaces with a class of its own once any file of this
      // worker serves over HTTP, and a clone is an instance of the original class.
      const answer = await t.app.fetch(sent)
      const text = await answer.clone().text()
      const url = new URL(request.url)
      checked.push(
        ...contract.problems({
          method: request.method,
          url: url.pathname + url.search,
          status: answer.status,
          headers: answer.headers,
          text,
        }),
      )
      return answer
    }
    const seen = await readAll(fetcher, t.acme.token, {
      taskId: task.id,
      runId: started.body.id,
      gateId: gate.id,
      chatId: chat.body.id,
    })
    expect(checked).toEqual([])
    expect(seen.gate).toMatchObject({
      listed: gate.id,
      kind: 'tool',
      status: 'waiting',
      tool: 'os.mail_send',
      decision: 'approve',
      refusal: 'gate_not_waiting',
    })
    expect(seen.run).toEqual({
      gates: [gate.id],
      decided: expect.stringMatching(/^approve by token:/),
    })
    expect(seen.spend).toMatchObject({ enabled: expect.any(Boolean), caps: ['enterprise:12345'] })
    expect(seen.chat).toEqual({ messages: [`person: ${said}`], status: 'open' })
    expect(seen.note).toMatchObject({ layer: 'task', status: 'active', evidence: [] })
    // 10 s under `taskset -c 0 npm test`, 5 s on two cores (issue 40).
  }, 60_000)
})

import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import SwaggerParser from '@apidevtools/swagger-parser'
import openapiTS, { astToString } from 'openapi-typescript'
import ts from 'typescript'
import { beforeAll, describe, expect, it } from 'vitest'
import { createTestApp, type TestApp } from '../../helpers/app.js'

// The document as clients that generate code from it see it (issue 15): valid OpenAPI 3.1, every
// operation named, and the types openapi-typescript makes from it usable by a user's program.

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
    // Health and this document take no token, no parameter and no body: nothing a caller sends can be
    // refused, so they declare no 4xx rather than one they never answer. Any other operation must.
    const without4xx = operations
      .filter(({ op }) => !Object.keys(op.responses).some((status) => /^4\d\d$/.test(status)))
      .map(({ op }) => op.operationId)
    expect(without4xx.sort()).toEqual(['getHealth', 'getOpenApiDocument'])
    // Health's other answer is its 503 degraded, in the same shape as its 200.
    const health = document.paths['/v1/health']!.get!.responses
    expect(health['503']?.content).toEqual(health['200']?.content)
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
  const query: NonNullable<GetRun['parameters']['query']> = { waitSeconds: '5' }
  const read = await fetch(base + '/v1/runs/' + run.id + '?' + new URLSearchParams(query), { headers })
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

describe('a client generated with openapi-typescript', () => {
  it('type-checks a program that starts a run and reads it', async () => {
    const types = astToString(await openapiTS(structuredClone(document) as never))
    const dir = await mkdtemp(join(tmpdir(), 'osd-openapi-client-'))
    try {
      await writeFile(join(dir, 'osd-api.ts'), types)
      await writeFile(join(dir, 'client.ts'), client)
      await writeFile(join(dir, 'package.json'), '{ "type": "module" }')
      const program = ts.createProgram([join(dir, 'client.ts')], {
        strict: true,
        noUncheckedIndexedAccess: true,
        exactOptionalPropertyTypes: true,
        noUnusedLocals: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        // fetch from the DOM library: the program needs nothing from node_modules.
        lib: ['lib.es2023.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
        types: [],
        noEmit: true,
        // The libraries are TypeScript's own; the generated types (a .ts file) are still checked.
        skipLibCheck: true,
      })
      const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => {
        const text = ts.flattenDiagnosticMessageText(d.messageText, '\n')
        const at =
          d.file && d.start !== undefined
            ? d.file.getLineAndCharacterOfPosition(d.start)
            : undefined
        return `${d.file?.fileName.slice(dir.length + 1) ?? ''}:${at ? at.line + 1 : ''} ${text}`
      })
      expect(diagnostics).toEqual([])
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

import { readdir, readFile } from 'node:fs/promises'
import { join, relative } from 'node:path'
import ts from 'typescript'
import { beforeAll, describe, expect, it } from 'vitest'
import { projectRoot } from '../../shared/paths.js'
import { createTestApp, type TestApp } from '../helpers/app.js'

// Every route of the daemon has an osctl verb (DESIGN 9: osctl mirrors the API). The routes come from
// the OpenAPI document the daemon serves; the calls osctl makes are read from its sources (cli/**),
// so a route added without a verb, or a verb calling a route that does not exist, fails here.

/**
 * Routes served without a token that are not for people: the OpenAPI document itself, the two
 * inbound webhooks, which other systems call with the webhook secret (spec: Routes without a token),
 * and the liveness and readiness probes a Kubernetes kubelet calls (issue 33; `osctl health` reads
 * /v1/health). `osctl webhooks replay` re-applies a stored delivery instead.
 */
const notForPeople = [
  'GET /v1/openapi.json',
  'GET /v1/health/live',
  'GET /v1/health/ready',
  'POST /v1/webhooks/{enterprise}/tasks/{task}',
  'POST /v1/webhooks/{enterprise}/gates/{gateId}',
]

/** `/v1/tasks/{id}`, `/tasks/${id}` and `/tasks/${await taskId(client, ref)}` all become `/tasks/{}`. */
export function normalize(path: string): string {
  const bare = path
    .split('?')[0]!
    .replace(/^\/v1(?=\/|$)/, '')
    .replace(/\$\{[^}]*\}|\{[^}]*\}/g, '{}')
  return bare.length > 1 ? bare.replace(/\/+$/, '') : bare
}

const httpMethods: Record<string, string> = {
  get: 'GET',
  all: 'GET', // every page of a paged list
  post: 'POST',
  put: 'PUT',
  patch: 'PATCH',
  delete: 'DELETE',
  stream: 'GET', // a text/event-stream read (the chat screen's events)
}

/** A path as the source spells it: a literal (template spans become `{}`), else a name to resolve. */
type PathExpr = { path: string } | { name: string; node: ts.Node } | undefined

function pathOf(node: ts.Expression | undefined): PathExpr {
  if (!node) return undefined
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node))
    return node.text.startsWith('/') ? { path: node.text } : undefined
  if (ts.isTemplateExpression(node)) {
    const text = node.head.text + node.templateSpans.map((s) => '{}' + s.literal.text).join('')
    return text.startsWith('/') ? { path: text } : undefined
  }
  if (ts.isIdentifier(node)) return { name: node.text, node }
  if (ts.isPropertyAccessExpression(node)) return { name: node.name.text, node }
  return undefined
}

interface Call {
  method: string
  path: string
  file: string
}

/** A function of cli/ that passes one of its parameters on as the path of a client call. */
interface Forwarder {
  fn: string
  index: number
  method: string
}

function enclosingFunction(node: ts.Node): { name: string; params: string[] } | undefined {
  for (let n: ts.Node | undefined = node.parent; n; n = n.parent) {
    if (ts.isFunctionDeclaration(n) || ts.isArrowFunction(n) || ts.isFunctionExpression(n)) {
      const name =
        n.name?.getText() ??
        (ts.isVariableDeclaration(n.parent) ? n.parent.name.getText() : undefined)
      if (name) return { name, params: n.parameters.map((p) => p.name.getText()) }
    }
  }
  return undefined
}

async function sourcesOf(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile() && /\.tsx?$/.test(e.name))
    .map((e) => join(e.parentPath, e.name))
}

/** Every (method, path) osctl can send, read from the sources of cli/ (commands, helpers, TUI). */
async function callsOfOsctl(): Promise<Call[]> {
  const files = (await sourcesOf(join(projectRoot, 'cli'))).filter(
    (f) => !f.endsWith(join('cli', 'client.ts')), // the transport: its own paths are parameters
  )
  const parsed = await Promise.all(
    files.map(async (file) => {
      const text = await readFile(file, 'utf8')
      const kind = file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS
      const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true, kind)
      return { file: relative(projectRoot, file), source }
    }),
  )

  const calls: Call[] = []
  const forwarders: Forwarder[] = []
  // Literals a name holds in a file (`path: '/enterprise/concurrency'` in a table of settings).
  const literalsOf = (source: ts.SourceFile, name: string): string[] => {
    const found: string[] = []
    const visit = (node: ts.Node) => {
      if (
        (ts.isPropertyAssignment(node) || ts.isVariableDeclaration(node)) &&
        node.name.getText() === name &&
        node.initializer
      ) {
        const value = pathOf(node.initializer)
        if (value && 'path' in value) found.push(value.path)
      }
      ts.forEachChild(node, visit)
    }
    visit(source)
    return found
  }
  const record = (file: string, source: ts.SourceFile, method: string, expr: PathExpr) => {
    if (!expr) return
    if ('path' in expr) {
      calls.push({ method, path: expr.path, file })
      return
    }
    const fn = enclosingFunction(expr.node)
    const index = fn && ts.isIdentifier(expr.node) ? fn.params.indexOf(expr.name) : -1
    if (fn && index >= 0) forwarders.push({ fn: fn.name, index, method })
    else for (const path of literalsOf(source, expr.name)) calls.push({ method, path, file })
  }

  for (const { file, source } of parsed) {
    const visit = (node: ts.Node) => {
      if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
        const verb = node.expression.name.text
        const receiver = node.expression.expression.getText()
        if (/client/i.test(receiver)) {
          if (verb in httpMethods)
            record(file, source, httpMethods[verb]!, pathOf(node.arguments[0]))
          if (verb === 'raw' || verb === 'request') {
            const method = node.arguments[0]
            if (method && ts.isStringLiteral(method))
              record(file, source, method.text.toUpperCase(), pathOf(node.arguments[1]))
          }
        }
      }
      ts.forEachChild(node, visit)
    }
    visit(source)
  }

  // Calls of the forwarding helpers (printPaged(deps, '/tasks', ...)); a helper may forward in turn.
  const seen = new Set<string>()
  for (let i = 0; i < forwarders.length; i++) {
    const forwarder = forwarders[i]!
    const key = `${forwarder.fn}/${forwarder.index}/${forwarder.method}`
    if (seen.has(key)) continue
    seen.add(key)
    for (const { file, source } of parsed) {
      const visit = (node: ts.Node) => {
        if (ts.isCallExpression(node)) {
          const callee = node.expression
          const name = ts.isIdentifier(callee)
            ? callee.text
            : ts.isPropertyAccessExpression(callee)
              ? callee.name.text
              : undefined
          if (name === forwarder.fn)
            record(file, source, forwarder.method, pathOf(node.arguments[forwarder.index]))
        }
        ts.forEachChild(node, visit)
      }
      visit(source)
    }
  }
  return calls
}

let app: TestApp
let operations: string[]
let calls: Call[]

beforeAll(async () => {
  app = await createTestApp()
  const document = (await app.call('GET', '/v1/openapi.json', { token: null })).body as {
    paths: Record<string, Record<string, unknown>>
  }
  const verbs = ['get', 'post', 'put', 'patch', 'delete']
  operations = Object.entries(document.paths).flatMap(([path, item]) =>
    Object.keys(item)
      .filter((m) => verbs.includes(m))
      .map((m) => `${m.toUpperCase()} ${path}`),
  )
  calls = await callsOfOsctl()
})

describe('osctl covers the API', () => {
  it('reads the routes and the calls', () => {
    expect(operations.length).toBeGreaterThan(50)
    expect(calls).toContainEqual(
      expect.objectContaining({ method: 'GET', path: '/tasks' }), // through printPaged
    )
    expect(calls).toContainEqual(
      expect.objectContaining({ method: 'PATCH', path: '/enterprise/concurrency' }), // a settings table
    )
    for (const excluded of notForPeople) expect(operations).toContain(excluded)
  })

  it('has a verb calling every route (but the ones not for people)', () => {
    const called = new Set(calls.map((c) => `${c.method} ${normalize(c.path)}`))
    const missing = operations.filter((op) => {
      if (notForPeople.includes(op)) return false
      const [method, path] = op.split(' ') as [string, string]
      return !called.has(`${method} ${normalize(path)}`)
    })
    expect(missing, `routes no osctl command calls:\n  ${missing.join('\n  ')}\n`).toEqual([])
  })

  it('calls no route the daemon does not serve', () => {
    const served = new Set(
      operations.map((op) => {
        const [method, path] = op.split(' ') as [string, string]
        return `${method} ${normalize(path)}`
      }),
    )
    const unknown = calls.filter((c) => !served.has(`${c.method} ${normalize(c.path)}`))
    expect(
      unknown.map((c) => `${c.method} ${c.path} (${c.file})`),
      'osctl calls routes the daemon does not serve',
    ).toEqual([])
  })
})

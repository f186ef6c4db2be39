import { randomBytes } from 'node:crypto'
import pino from 'pino'
import { createSealer, type Sealer } from '../../server/crypto.js'
import { allScopes, type Scope } from '../../shared/scopes.js'
import { loadConfig, type Config } from '../../server/config.js'
import { createSql, type Sql } from '../../server/db/sql.js'
import { createEnterprise } from '../../server/domain/enterprises/index.js'
import { createToken } from '../../server/domain/people/index.js'
import { createApp } from '../../server/http/app.js'
import type { Logger } from '../../server/log.js'
import { Contract } from './contract.js'
import { createTestDatabase } from './db.js'

export interface Answer<T = any> {
  status: number
  body: T
  headers: Headers
  text: string
}

export interface CallOptions {
  /** Bearer token; defaults to the enterprise's all-scope token. `null` sends none. */
  token?: string | null
  body?: unknown
  /** Raw body, sent as is (with its own content-type header, if any). */
  raw?: string | Uint8Array
  headers?: Record<string, string>
}

export interface TestEnterprise {
  id: string
  slug: string
  /** Holds every scope. */
  token: string
}

export interface TestApp {
  sql: Sql
  dbUrl: string
  config: Config
  log: Logger
  sealer: Sealer
  app: ReturnType<typeof createApp>
  /** The enterprise the tests act as. */
  acme: TestEnterprise
  /** Another enterprise, whose ids must be invisible to acme (spec: Concepts, Enterprise). */
  other: TestEnterprise
  /**
   * A request to the app. Its answer is held against the app's OpenAPI document (helpers/contract.ts):
   * an answer the document does not declare fails the test that saw it.
   */
  call<T = any>(method: string, path: string, options?: CallOptions): Promise<Answer<T>>
  /** The app's OpenAPI document as a validator holds it, for tests that send requests of their own. */
  contract(): Promise<Contract>
  /**
   * Holds an answer a test got on its own (from another app, a streamed request, a file, an event
   * stream) against the document as call() does; the answer stays unread.
   */
  expectDocumented(method: string, url: string, res: Response): Promise<void>
  /** A token of acme holding exactly these scopes. */
  tokenWith(scopes: Scope[], enterprise?: TestEnterprise): Promise<string>
  createEnterprise(name: string): Promise<TestEnterprise>
}

export const silentLog: Logger = pino({ level: 'silent' })

/** A new enterprise and a token of it holding every scope. */
export async function createTestEnterprise(
  sql: Sql,
  name: string,
  config: Pick<Config, 'mailDomain'>,
): Promise<TestEnterprise> {
  const enterprise = await createEnterprise(sql, { name }, config)
  const { token } = await createToken(sql, enterprise.id, { name: 'all', scopes: allScopes })
  return { id: enterprise.id, slug: enterprise.slug, token }
}

/** The app that `osd serve` serves, on a database of this test file's own. */
export async function createTestApp(overrides: Partial<Config> = {}): Promise<TestApp> {
  const db = await createTestDatabase()
  // The test process's OSD_EGRESS_ALLOW (vitest.config.ts): the fake tool servers are on 127.0.0.1.
  const env = { DATABASE_URL: db.url, OSD_EGRESS_ALLOW: process.env.OSD_EGRESS_ALLOW }
  const config = { ...loadConfig({}, env), ...overrides }
  const sealer = createSealer(randomBytes(32))
  const app = createApp({ sql: db.sql, config, log: silentLog, sealer })

  const makeEnterprise = (name: string) => createTestEnterprise(db.sql, name, config)
  const acme = await makeEnterprise('Acme')
  const other = await makeEnterprise('Other Corp')

  async function call<T>(
    method: string,
    path: string,
    options: CallOptions = {},
  ): Promise<Answer<T>> {
    const headers: Record<string, string> = { ...options.headers }
    const token = options.token === undefined ? acme.token : options.token
    if (token) headers.authorization = `Bearer ${token}`
    let body: string | Uint8Array | undefined = options.raw
    if (options.body !== undefined && method !== 'GET' && method !== 'HEAD') {
      body = JSON.stringify(options.body)
      headers['content-type'] ??= 'application/json'
    }
    const res = await app.request(path, { method, headers, body: body as RequestInit['body'] })
    const text = await res.text()
    await documented(method, path, res, text)
    let parsed: unknown = text
    try {
      parsed = text ? JSON.parse(text) : undefined
    } catch {
      // not JSON: the text is the body
    }
    return { status: res.status, body: parsed as T, headers: res.headers, text }
  }

  let checker: Promise<Contract> | undefined
  const contract = () => (checker ??= contractOf(app))
  async function documented(method: string, url: string, res: Response, text: string) {
    const problems = (await contract()).problems({
      method,
      url,
      status: res.status,
      headers: res.headers,
      text,
    })
    if (problems.length > 0)
      throw new Error(`the answer breaks the OpenAPI document:\n${problems.join('\n')}`)
  }

  return {
    sql: db.sql,
    dbUrl: db.url,
    config,
    log: silentLog,
    sealer,
    app,
    acme,
    other,
    call,
    contract,
    async expectDocumented(method, url, res) {
      // An event stream may never end: its status and media type are checked, its body left unread.
      const stream = res.headers.get('content-type')?.startsWith('text/event-stream')
      await documented(method, url, res, stream ? '' : await res.clone().text())
    },
    createEnterprise: makeEnterprise,
    async tokenWith(scopes, enterprise = acme) {
      return (await createToken(db.sql, enterprise.id, { name: 'scoped', scopes })).token
    },
  }
}

/** Documents already compiled into a validator, by their text: every app of a test file serves one. */
const contracts = new Map<string, Contract>()

async function contractOf(app: ReturnType<typeof createApp>): Promise<Contract> {
  const text = await (await app.request('/v1/openapi.json')).text()
  let contract = contracts.get(text)
  if (!contract) contracts.set(text, (contract = new Contract(JSON.parse(text))))
  return contract
}

/**
 * The same app on a pool of its own, as a second osd process on the database has: its own caches and
 * listeners. `status(secret)` is what it answers GET /v1/tasks with that credential.
 */
export function anotherProcess(t: TestApp) {
  const sql = createSql(t.dbUrl, { max: 2 })
  const app = createApp({ sql, config: t.config, log: t.log, sealer: t.sealer })
  return {
    app,
    async status(secret: string): Promise<number> {
      const res = await app.request('/v1/tasks', { headers: { authorization: `Bearer ${secret}` } })
      return res.status
    },
    close: () => sql.end(),
  }
}

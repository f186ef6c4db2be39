import { randomUUID } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import pino from 'pino'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { parseEgressAllow, type EgressRule } from '../../../server/egress.js'
import type { Engine } from '../../../server/engine/index.js'
import { ToolConnection } from '../../../shared/schemas/tools.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Where a tenant may send osd (issue 44, item 1; DESIGN 15; OWASP API7, server-side request forgery).
// A tools:write token could make osd POST, with an Authorization header of its choosing, to the cloud
// metadata service, the database port, or anything else on osd's own network. Every address a tenant
// gives osd now obeys one egress rule, checked when it is saved (400 url_not_allowed, saying why) and
// again when osd connects, against the address it connects to, redirects included.
//
// This file's app has a rule of its own: its OSD_EGRESS_ALLOW (empty unless a test sets it) and a
// resolver the tests answer for, so a name can resolve to a public address when it is saved and to a
// private one when osd connects, as a rebinding name would, without touching the system's resolver.

let t: TestApp
let model: FakeModelProvider
let engine: Engine
const servers: { close(): Promise<void> }[] = []
/** What the engine logged at warn and above, parsed. */
const logged: { msg: string; err?: string; connection?: string }[] = []

/** The test's DNS: name -> addresses. */
const dns = new Map<string, string[]>()
const rule: EgressRule = {
  allow: parseEgressAllow(''),
  async resolve(name) {
    const addresses = dns.get(name)
    if (!addresses) throw Object.assign(new Error(`${name} is not known`), { code: 'ENOTFOUND' })
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
  },
}
/** What OSD_EGRESS_ALLOW says for the app and its engine from now on. */
const allow = (text: string) => (rule.allow = parseEgressAllow(text))

/** An address of the public internet that no test connects to. */
const publicAddress = '93.184.215.14'

beforeAll(async () => {
  model = await startFakeModelProvider()
  t = await createTestApp({
    providerBaseUrls: { provider_a: model.url, provider_b: model.url },
    egress: rule,
  })
  const log = pino(
    { level: 'warn' },
    { write: (line: string) => void logged.push(JSON.parse(line)) },
  )
  engine = await startTestEngine(t, { log })
})
beforeEach(() => {
  allow('')
  dns.clear()
})
afterAll(async () => {
  await engine?.stop()
  await Promise.all(servers.map((s) => s.close()))
  await model?.close()
})

/** An enterprise with a model key, its team, a task that may call vcs.echo, and its runs. */
async function tenant() {
  const { e, key, as } = await keyedEnterprise(t, 'Egress')
  const [team] = (await t.call('GET', '/v1/teams', as)).body as { id: string }[]
  const connect = (body: Record<string, unknown>) =>
    t.call('POST', '/v1/tools/bindings', {
      ...as,
      body: { name: 'vcs', layer: 'team', layerId: team!.id, ...body },
    })
  const run = async () => {
    const task = await t.call('POST', '/v1/tasks', {
      ...as,
      body: {
        name: `Echo ${randomUUID().slice(0, 8)}`,
        teamId: team!.id,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        tools: ['vcs.echo'],
      },
    })
    expect(task.status, task.text).toBe(201)
    model.script(key, { toolCalls: [{ name: 'vcs.echo', arguments: { text: 'hi' } }] }, finish)
    const started = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...as, body: {} })
    expect(started.status, started.text).toBe(201)
    const done = await waitForRun(t, started.body.id, ['succeeded', 'failed'], 15_000, e.token)
    expect(done.run.status).toBe('succeeded')
    // What the model was told of its call, from the request that followed it.
    return JSON.stringify(model.callsWith(key).at(-1)!.body.messages.at(-1))
  }
  return { e, as, team: team!, connect, run }
}

const finish = { toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded' } }] }

async function toolServer() {
  const server = await startFakeMcpServer()
  servers.push(server)
  return server
}

/** A server on 127.0.0.1 that answers every request with a redirect to `location`. */
async function redirecting(location: string) {
  const seen: (string | undefined)[] = []
  const server: Server = createServer((req, res) => {
    seen.push(req.headers.authorization)
    req.resume()
    res.writeHead(307, { location }).end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  servers.push({
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  })
  return { port: (server.address() as AddressInfo).port, seen }
}

const why = (refusal: string) => `${refusal}; set OSD_EGRESS_ALLOW to allow it`

describe('a tool connection to where osd must not go is refused when saved (400 url_not_allowed)', () => {
  it.each([
    [
      'http://169.254.169.254/latest/meta-data/',
      why('169.254.169.254 is a link-local address (the cloud metadata service)'),
    ],
    ['http://10.0.0.1/', why('10.0.0.1 is a private address')],
    ['http://127.0.0.1:5432/', why('127.0.0.1 is a loopback address')],
    ['http://[::1]:22/', why('::1 is a loopback address')],
    [
      'http://[fd00:ec2::254]/latest/meta-data/',
      why('fd00:ec2::254 is a link-local address (the cloud metadata service)'),
    ],
    [
      'http://[::ffff:127.0.0.1]:5432/',
      why('::ffff:7f00:1 is a loopback address (127.0.0.1 written as IPv6)'),
    ],
    ['http://0.0.0.0:8080/', why('0.0.0.0 is an unspecified address')],
    ['http://metadata.google.internal/', why('metadata.google.internal is a cloud metadata name')],
    ['file:///etc/passwd', 'file: addresses are not allowed: osd connects to http and https only'],
    [
      'gopher://127.0.0.1:6379/_INFO',
      'gopher: addresses are not allowed: osd connects to http and https only',
    ],
  ])('%s', async (url, refusal) => {
    const s = await tenant()
    const res = await s.connect({ url, token: 'Bearer-of-my-choice' })
    expect(res.status, res.text).toBe(400)
    expect(res.body).toMatchObject({
      error: 'url_not_allowed',
      message: `url: ${url} is not allowed: ${refusal}.`,
    })
    expect((await t.call('GET', '/v1/tools/bindings', s.as)).body).toEqual([])
  })

  it('a name that resolves to a private address, any one of its addresses', async () => {
    dns.set('internal.test', [publicAddress, '10.20.30.40'])
    const s = await tenant()
    const res = await s.connect({ url: 'https://internal.test/mcp' })
    expect(res.status, res.text).toBe(400)
    expect(res.body.message).toBe(
      `url: https://internal.test/mcp is not allowed: ${why('internal.test resolves to 10.20.30.40, a private address')}.`,
    )
  })

  it('a change that moves a connection there, which then keeps its address and token', async () => {
    dns.set('tools.test', [publicAddress])
    const s = await tenant()
    const made = await s.connect({ url: 'https://tools.test/mcp', token: 'kept' })
    expect(made.status, made.text).toBe(201)
    const moved = await t.call('PATCH', `/v1/tools/bindings/${made.body.id}`, {
      ...s.as,
      body: { url: 'http://169.254.169.254/latest/api/token' },
    })
    expect(moved.status, moved.text).toBe(400)
    expect(moved.body.error).toBe('url_not_allowed')
    const [kept] = (await t.call('GET', '/v1/tools/bindings', s.as)).body
    expect(ToolConnection.parse(kept)).toMatchObject({
      url: 'https://tools.test/mcp',
      hasToken: true,
    })
  })

  it("a browser connection's sites and start page", async () => {
    dns.set('intranet.test', ['192.168.0.10'])
    const s = await tenant()
    const site = await s.connect({ url: undefined, sites: ['crm.example', 'intranet.test'] })
    expect(site.status, site.text).toBe(400)
    expect(site.body.message).toBe(
      `sites: https://intranet.test is not allowed: ${why('intranet.test resolves to 192.168.0.10, a private address')}.`,
    )
    const start = await s.connect({
      url: undefined,
      sites: ['crm.example'],
      startPage: 'http://169.254.169.254/',
    })
    expect(start.status, start.text).toBe(400)
    expect(start.body.message).toMatch(/^startPage: http:\/\/169\.254\.169\.254\/ is not allowed/)
  })

  it('is accepted once OSD_EGRESS_ALLOW allows it; other schemes never are', async () => {
    allow('127.0.0.0/8,::1,10.0.0.0/8,169.254.169.254,metadata.google.internal')
    dns.set('internal.test', ['10.20.30.40'])
    const s = await tenant()
    for (const [i, url] of [
      'http://127.0.0.1:5432/',
      'http://[::1]:22/',
      'http://10.0.0.1/',
      'https://internal.test/mcp',
      'http://169.254.169.254/latest/meta-data/',
      'http://metadata.google.internal/',
    ].entries()) {
      const res = await s.connect({ name: `allowed${i}`, url })
      expect(res.status, `${url}: ${res.text}`).toBe(201)
    }
    const file = await s.connect({ url: 'file:///etc/passwd' })
    expect(file.status).toBe(400)
    expect(file.body.error).toBe('url_not_allowed')
  })
})

describe('osd checks again when it connects, against the address it uses', () => {
  it('a saved name whose answer changed to a private address is not connected to', async () => {
    const mcp = await toolServer()
    const port = new URL(mcp.url).port
    dns.set('tools.test', [publicAddress])
    const s = await tenant()
    const made = await s.connect({ url: `http://tools.test:${port}/mcp`, token: 'secret' })
    expect(made.status, made.text).toBe(201)
    // The name now answers the address the tool server listens on: 127.0.0.1, not allowed.
    dns.set('tools.test', ['127.0.0.1'])
    expect(await s.run()).toMatch(/vcs\.echo is not one of this task's tools/)
    expect(mcp.authorizations).toEqual([])
    // The operator reads why in the engine's log.
    expect(logged).toContainEqual(
      expect.objectContaining({
        msg: 'tool server did not answer; its tools are left out',
        connection: 'vcs',
        err: why('tools.test resolves to 127.0.0.1, a loopback address'),
      }),
    )
    // The same connection, once the operator allows loopback: osd connects and calls.
    allow('127.0.0.0/8')
    expect(await s.run()).toMatch(/"hi"|hi/)
    expect(mcp.callsOf('echo')).toHaveLength(1)
  })

  it('a redirect to a refused address is not followed; once allowed it is, without the token', async () => {
    const target = await toolServer()
    const redirect = await redirecting(target.url)
    dns.set('redirect.test', ['127.0.0.1'])
    allow('redirect.test')
    const s = await tenant()
    const made = await s.connect({
      url: `http://redirect.test:${redirect.port}/mcp`,
      token: 'for-redirect-test-only',
    })
    expect(made.status, made.text).toBe(201)
    expect(await s.run()).toMatch(/vcs\.echo is not one of this task's tools/)
    expect(redirect.seen.length).toBeGreaterThan(0)
    expect(redirect.seen[0]).toBe('Bearer for-redirect-test-only')
    expect(target.authorizations).toEqual([])

    allow(`redirect.test,127.0.0.0/8`)
    await s.run()
    expect(target.callsOf('echo')).toHaveLength(1)
    // Another origin (another port): undici drops the Authorization header on the way.
    expect(target.authorizations.length).toBeGreaterThan(0)
    expect(target.authorizations.every((a) => a === undefined)).toBe(true)
  })
})

import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { afterEach, describe, expect, it } from 'vitest'
import { eventually } from '../helpers/wait.js'
import { startFakeMcpServer, type FakeMcpServer } from './mcp-server.js'

const servers: FakeMcpServer[] = []
const clients: Client[] = []

afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((client) => client.close()))
  await Promise.allSettled(servers.splice(0).map((server) => server.close()))
})

async function start(options?: { token?: string }): Promise<FakeMcpServer> {
  const server = await startFakeMcpServer(options)
  servers.push(server)
  return server
}

async function connect(
  server: FakeMcpServer,
  token?: string,
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'fake-mcp-test', version: '1.0.0' })
  clients.push(client)
  const transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: token === undefined ? {} : { headers: { Authorization: `Bearer ${token}` } },
  })
  await client.connect(transport)
  return { client, transport }
}

async function call(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult
}

function text(result: CallToolResult): string {
  return result.content.map((part) => (part.type === 'text' ? part.text : '')).join('')
}

describe('fake MCP server', () => {
  it('listens on 127.0.0.1 and serves /mcp', async () => {
    const server = await start()
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/)
    const other = await fetch(new URL('/elsewhere', server.url))
    expect(other.status).toBe(404)
  })

  it('lists its tools with JSON schemas of their inputs', async () => {
    const server = await start({ token: 'secret' })
    const { client } = await connect(server, 'secret')
    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      'echo',
      'merge_pull_request',
      'open_pull_request',
    ])
    const byName = new Map(tools.map((tool) => [tool.name, tool]))
    expect(byName.get('merge_pull_request')).toMatchObject({
      description: expect.any(String),
      inputSchema: {
        type: 'object',
        properties: { repo: { type: 'string' }, number: { type: 'integer' } },
        required: ['repo', 'number'],
      },
      annotations: { destructiveHint: true },
    })
    expect(byName.get('open_pull_request')?.inputSchema).toMatchObject({
      type: 'object',
      properties: { repo: { type: 'string' }, title: { type: 'string' } },
      required: ['repo', 'title'],
    })
    expect(byName.get('echo')?.inputSchema).toMatchObject({
      type: 'object',
      properties: { text: { type: 'string' } },
      required: ['text'],
    })
  })

  it('calls each tool', async () => {
    const server = await start()
    const { client } = await connect(server)
    const merged = await call(client, 'merge_pull_request', { repo: 'acme/app', number: 7 })
    expect(merged.isError).toBeFalsy()
    expect(text(merged)).toBe('merged acme/app#7')
    expect(text(await call(client, 'open_pull_request', { repo: 'acme/app', title: 'A' }))).toBe(
      'opened acme/app#1',
    )
    expect(text(await call(client, 'open_pull_request', { repo: 'acme/web', title: 'B' }))).toBe(
      'opened acme/web#2',
    )
    expect(text(await call(client, 'echo', { text: 'hello' }))).toBe('hello')
  })

  it('records every call with its arguments, token and time', async () => {
    const server = await start({ token: 'secret' })
    const { client } = await connect(server, 'secret')
    const before = Date.now()
    await call(client, 'merge_pull_request', { repo: 'acme/app', number: 7 })
    await call(client, 'echo', { text: 'one' })
    await call(client, 'echo', { text: 'two' })
    expect(server.calls.map((c) => c.name)).toEqual(['merge_pull_request', 'echo', 'echo'])
    expect(server.callsOf('merge_pull_request')).toEqual([
      {
        name: 'merge_pull_request',
        arguments: { repo: 'acme/app', number: 7 },
        token: 'secret',
        at: expect.any(Number),
      },
    ])
    expect(server.callsOf('echo').map((c) => c.arguments)).toEqual([
      { text: 'one' },
      { text: 'two' },
    ])
    for (const recorded of server.calls) {
      expect(recorded.at).toBeGreaterThanOrEqual(before)
      expect(recorded.at).toBeLessThanOrEqual(Date.now())
    }
    expect(server.callsOf('open_pull_request')).toEqual([])
  })

  it('records the token a client sends even when none is required, and none when none is sent', async () => {
    const server = await start()
    const { client: anonymous } = await connect(server)
    const { client: withToken } = await connect(server, 'tok-1')
    await call(anonymous, 'echo', { text: 'a' })
    await call(withToken, 'echo', { text: 'b' })
    expect(server.callsOf('echo').map((c) => c.token)).toEqual([undefined, 'tok-1'])
  })

  it('does not run a tool on invalid arguments, answering a tool error', async () => {
    const server = await start()
    const { client } = await connect(server)
    const result = await call(client, 'merge_pull_request', { repo: 'acme/app', number: 'seven' })
    expect(result.isError).toBe(true)
    expect(server.calls).toEqual([])
  })

  it('fails the next call of a tool, once, with a tool error', async () => {
    const server = await start()
    const { client } = await connect(server)
    server.failNext('merge_pull_request', 'merge conflict')
    const failed = await call(client, 'merge_pull_request', { repo: 'acme/app', number: 7 })
    expect(failed.isError).toBe(true)
    expect(text(failed)).toBe('merge conflict')
    const next = await call(client, 'merge_pull_request', { repo: 'acme/app', number: 7 })
    expect(next.isError).toBeFalsy()
    expect(text(next)).toBe('merged acme/app#7')
    expect(server.callsOf('merge_pull_request')).toHaveLength(2)
    expect(() => server.failNext('no_such_tool', 'x')).toThrow(/no tool no_such_tool/)
  })

  it('delays the calls of a tool', async () => {
    const server = await start()
    const { client } = await connect(server)
    server.delay('echo', 300)
    const started = Date.now()
    expect(text(await call(client, 'echo', { text: 'slow' }))).toBe('slow')
    expect(Date.now() - started).toBeGreaterThanOrEqual(290)
    server.delay('echo', 0)
    const again = Date.now()
    await call(client, 'echo', { text: 'fast' })
    expect(Date.now() - again).toBeLessThan(290)
  })

  it('refuses requests without the token, or with a wrong one', async () => {
    const server = await start({ token: 'secret' })
    await expect(connect(server)).rejects.toMatchObject({ code: 401 })
    await expect(connect(server, 'wrong')).rejects.toMatchObject({ code: 401 })
    const raw = await fetch(server.url, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    })
    expect(raw.status).toBe(401)
    expect(raw.headers.get('www-authenticate')).toMatch(/^Bearer/)
    const { client } = await connect(server, 'secret')
    expect((await client.listTools()).tools.length).toBeGreaterThan(0)
    expect(server.calls).toEqual([])
  })

  it('adds tools, listed and callable by clients connected before and after', async () => {
    const server = await start({ token: 'secret' })
    const { client: early } = await connect(server, 'secret')
    server.addTool('create_issue', 'Create an issue.', (args) => `created ${String(args.title)}`)
    const { client: late } = await connect(server, 'secret')
    for (const client of [early, late]) {
      const { tools } = await client.listTools()
      expect(tools.find((tool) => tool.name === 'create_issue')).toMatchObject({
        description: 'Create an issue.',
        inputSchema: { type: 'object' },
      })
    }
    expect(text(await call(late, 'create_issue', { title: 'Bug', labels: ['x'] }))).toBe(
      'created Bug',
    )
    expect(text(await call(early, 'create_issue', { title: 'Other' }))).toBe('created Other')
    expect(server.callsOf('create_issue')).toMatchObject([
      { arguments: { title: 'Bug', labels: ['x'] }, token: 'secret' },
      { arguments: { title: 'Other' }, token: 'secret' },
    ])
    server.failNext('create_issue', 'nope')
    expect((await call(early, 'create_issue', {})).isError).toBe(true)
    expect(() => server.addTool('echo', 'again', () => '')).toThrow(/already exists/)
  })

  it('ends a session on DELETE', async () => {
    const server = await start()
    const { transport } = await connect(server)
    const sessionId = transport.sessionId
    expect(sessionId).toEqual(expect.any(String))
    await transport.terminateSession()
    expect(transport.sessionId).toBeUndefined()
    const stale = await fetch(server.url, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        'Mcp-Session-Id': sessionId!,
        'Mcp-Protocol-Version': '2025-06-18',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    })
    expect(stale.status).toBe(404)
  })

  it('closes promptly with clients connected and a call in flight', async () => {
    const server = await start({ token: 'secret' })
    const { client } = await connect(server, 'secret')
    await connect(server, 'secret')
    await call(client, 'echo', { text: 'warm' })
    server.delay('echo', 60_000)
    const pending = call(client, 'echo', { text: 'slow' })
    await eventually(() => server.callsOf('echo').length === 2, 3000, 'the slow call to arrive')
    const started = Date.now()
    await server.close()
    expect(Date.now() - started).toBeLessThan(2000)
    const answer = await pending
    expect(answer.isError).toBe(true)
    expect(text(answer)).toMatch(/closed/)
    await server.close() // a second close is harmless
    await expect(fetch(server.url)).rejects.toThrow()
  })
})

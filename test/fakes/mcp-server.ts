import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js'
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js'
import { z } from 'zod'

/**
 * A fake MCP tool server for tests: MCP over Streamable HTTP (the SDK's own server classes, in
 * stateful mode: one McpServer and transport per session) on 127.0.0.1 at a free port.
 *
 * Connect with the SDK's client:
 *   const client = new Client({ name: 'test', version: '1.0.0' })
 *   await client.connect(new StreamableHTTPClientTransport(new URL(fake.url),
 *     { requestInit: { headers: { Authorization: 'Bearer secret' } } }))
 *
 * Tools (bare names; the product calls them as `<namespace>.<tool>`):
 * - merge_pull_request { repo: string, number: number } -> "merged <repo>#<number>" (the dangerous one)
 * - open_pull_request { repo: string, title: string } -> "opened <repo>#<n>", n = 1, 2, ...
 * - echo { text: string } -> the text
 */

export interface ToolCall {
  name: string
  arguments: Record<string, unknown>
  token: string | undefined
  at: number
}

export interface FakeMcpServer {
  /** e.g. http://127.0.0.1:1234/mcp (the URL a client connects to) */
  url: string
  /** Every call that reached a tool, in order of arrival (calls with invalid arguments never do). */
  calls: ToolCall[]
  /**
   * The Authorization header of every request that reached the server, whatever it asked for (a
   * session's start, a listing, a call), in order of arrival; undefined for one without the header.
   */
  authorizations: (string | undefined)[]
  /**
   * The traceparent header of every request that reached the server (undefined for one without it),
   * in order of arrival: a tool server that traces would continue osd's trace from it (issue 49).
   */
  traceparents: (string | undefined)[]
  /** The tracestate header of every request that reached the server, likewise. */
  tracestates: (string | undefined)[]
  callsOf(name: string): ToolCall[]
  /** How many sessions clients have opened (each connect of a client initializes one). */
  readonly connections: number
  /** The next call of this tool answers an MCP tool error with this text. */
  failNext(name: string, message: string): void
  /** Calls of this tool wait this long before answering. */
  delay(name: string, ms: number): void
  /**
   * The next call of this tool is counted (it reached the server) and then broken: `reset` drops the
   * connection without an answer, `malformed` answers a body that is not JSON-RPC.
   */
  breakNext(name: string, how: 'reset' | 'malformed'): void
  /** An extra tool returning fixed text. */
  addTool(name: string, description: string, reply: (args: Record<string, unknown>) => string): void
  /**
   * An extra tool whose every call answers `bytes` of text (as a tool result over the event stream),
   * made as it is sent, a chunk at a time as the client reads it: the test process never holds it.
   * `sent` counts what went out, so a test sees a client that stopped reading.
   */
  addFlood(name: string, bytes: number): { readonly sent: number; readonly calls: number }
  close(): Promise<void>
}

interface ToolDefinition {
  name: string
  description: string
  inputSchema: z.ZodObject
  annotations?: ToolAnnotations
  reply: (args: Record<string, unknown>) => string
}

interface Session {
  server: McpServer
  transport: StreamableHTTPServerTransport
}

/** The request's bearer token, if it has an `Authorization: Bearer <token>` header. */
function bearerToken(req: IncomingMessage): string | undefined {
  const match = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')
  return match?.[1]?.trim()
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers = {}): void {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers })
  res.end(JSON.stringify(body))
}

function toolError(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true }
}

function jsonRpcError(code: number, message: string) {
  return { jsonrpc: '2.0', error: { code, message }, id: null }
}

export async function startFakeMcpServer(options: { token?: string } = {}): Promise<FakeMcpServer> {
  const calls: ToolCall[] = []
  const authorizations: (string | undefined)[] = []
  const traceparents: (string | undefined)[] = []
  const tracestates: (string | undefined)[] = []
  const failures = new Map<string, string[]>()
  const delays = new Map<string, number>()
  const breaks = new Map<string, ('reset' | 'malformed')[]>()
  const floods = new Map<string, { bytes: number; sent: number; calls: number }>()
  const tools = new Map<string, ToolDefinition>()
  const sessions = new Map<string, Session>()
  const closing = new AbortController()
  const inFlight = new Set<Promise<CallToolResult>>()
  const responses = new Set<ServerResponse>()
  let pullRequests = 0
  let connections = 0

  async function run(
    tool: ToolDefinition,
    args: Record<string, unknown>,
    authInfo: AuthInfo | undefined,
  ): Promise<CallToolResult> {
    calls.push({ name: tool.name, arguments: { ...args }, token: authInfo?.token, at: Date.now() })
    const answer = (async (): Promise<CallToolResult> => {
      const ms = delays.get(tool.name) ?? 0
      if (ms > 0) {
        // close() cuts delays short: the call then answers an error rather than leaving the client
        // waiting (the SDK client does not fail a request whose response stream ended, it times out).
        const aborted = await sleep(ms, false, { signal: closing.signal }).catch(() => true)
        if (aborted) return toolError('fake MCP server closed')
      }
      const failure = failures.get(tool.name)?.shift()
      if (failure !== undefined) return toolError(failure)
      return { content: [{ type: 'text', text: tool.reply(args) }] }
    })()
    inFlight.add(answer)
    try {
      return await answer
    } finally {
      inFlight.delete(answer)
    }
  }

  function register(server: McpServer, tool: ToolDefinition): void {
    server.registerTool(
      tool.name,
      {
        description: tool.description,
        inputSchema: tool.inputSchema,
        annotations: tool.annotations,
      },
      (args, extra) => run(tool, args, extra.authInfo),
    )
  }

  function define(tool: ToolDefinition): void {
    if (tools.has(tool.name)) throw new Error(`fake MCP server: tool ${tool.name} already exists`)
    tools.set(tool.name, tool)
    // Sessions already open see the tool too (the SDK notifies them with tools/list_changed).
    for (const session of sessions.values()) register(session.server, tool)
  }

  function known(name: string): void {
    if (!tools.has(name)) throw new Error(`fake MCP server: no tool ${name}`)
  }

  define({
    name: 'merge_pull_request',
    description: 'Merge a pull request.',
    inputSchema: z.object({
      repo: z.string().describe('owner/name'),
      number: z.number().int().describe('Pull request number'),
    }),
    annotations: { destructiveHint: true, readOnlyHint: false },
    reply: (args) => `merged ${String(args.repo)}#${String(args.number)}`,
  })
  define({
    name: 'open_pull_request',
    description: 'Open a pull request.',
    inputSchema: z.object({ repo: z.string().describe('owner/name'), title: z.string() }),
    annotations: { destructiveHint: false, readOnlyHint: false },
    reply: (args) => `opened ${String(args.repo)}#${++pullRequests}`,
  })
  define({
    name: 'echo',
    description: 'Answer the text it is given.',
    inputSchema: z.object({ text: z.string() }),
    annotations: { readOnlyHint: true },
    reply: (args) => String(args.text),
  })

  async function openSession(): Promise<Session> {
    const server = new McpServer({ name: 'fake-mcp-server', version: '1.0.0' })
    for (const tool of tools.values()) register(server, tool)
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        connections++
        sessions.set(id, session)
      },
    })
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId)
    }
    const session: Session = { server, transport }
    await server.connect(transport)
    return session
  }

  async function handle(req: IncomingMessage & { auth?: AuthInfo }, res: ServerResponse) {
    authorizations.push(req.headers.authorization)
    traceparents.push(req.headers.traceparent as string | undefined)
    tracestates.push(req.headers.tracestate as string | undefined)
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname
    if (path !== '/mcp') return sendJson(res, 404, { error: 'not_found' })

    const token = bearerToken(req)
    if (options.token !== undefined && token !== options.token) {
      return sendJson(
        res,
        401,
        { error: 'invalid_token', error_description: 'Missing or invalid bearer token' },
        { 'WWW-Authenticate': 'Bearer error="invalid_token"' },
      )
    }
    // The SDK hands req.auth to tool callbacks as extra.authInfo.
    if (token !== undefined) req.auth = { token, clientId: 'fake-mcp-client', scopes: [] }

    const sessionId = req.headers['mcp-session-id']
    if (typeof sessionId === 'string') {
      const session = sessions.get(sessionId)
      if (!session) return sendJson(res, 404, jsonRpcError(-32001, 'Session not found'))
      if (req.method === 'POST' && (breaks.size > 0 || floods.size > 0)) {
        // Read here, to break a call of a tool that is to break; the transport takes the parsed body.
        const chunks: Buffer[] = []
        for await (const chunk of req) chunks.push(chunk as Buffer)
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null') as {
          id?: unknown
          method?: string
          params?: { name?: string; arguments?: Record<string, unknown> }
        } | null
        const name = body?.method === 'tools/call' ? body.params?.name : undefined
        const flood = name === undefined ? undefined : floods.get(name)
        if (flood) return void sendFlood(res, body!.id, flood)
        const how = name === undefined ? undefined : breaks.get(name)?.shift()
        if (how) {
          calls.push({
            name: name!,
            arguments: { ...body!.params?.arguments },
            token,
            at: Date.now(),
          })
          if (how === 'reset') return void req.socket.destroy()
          res.writeHead(200, { 'Content-Type': 'application/json' })
          return void res.end(
            `{"jsonrpc":"2.0","id":${JSON.stringify(body!.id)},"result":{"content":[`,
          )
        }
        return session.transport.handleRequest(req, res, body)
      }
      return session.transport.handleRequest(req, res)
    }
    if (req.method !== 'POST') {
      return sendJson(
        res,
        400,
        jsonRpcError(-32000, 'Bad Request: Mcp-Session-Id header is required'),
      )
    }
    // A POST without a session: an initialize request opens a session; the transport rejects others.
    const session = await openSession()
    await session.transport.handleRequest(req, res)
    if (session.transport.sessionId === undefined) await session.server.close()
  }

  /** A tool result of flood.bytes of text, written only as fast as the client takes it. */
  async function sendFlood(
    res: ServerResponse,
    id: unknown,
    flood: { bytes: number; sent: number; calls: number },
  ) {
    flood.calls++
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' })
    const chunk = Buffer.alloc(64 * 1024, 'x')
    const parts = [
      Buffer.from('event: message\ndata: {"result":{"content":[{"type":"text","text":"'),
      ...Array.from({ length: Math.floor(flood.bytes / chunk.length) }, () => chunk),
      chunk.subarray(0, flood.bytes % chunk.length),
      Buffer.from(`"}]},"jsonrpc":"2.0","id":${JSON.stringify(id)}}\n\n`),
    ]
    for (const part of parts) {
      if (res.destroyed) return
      flood.sent += part.length
      if (!res.write(part))
        await new Promise<void>((resolve) => {
          const go = () => {
            res.off('drain', go)
            res.off('close', go)
            resolve()
          }
          res.on('drain', go)
          res.on('close', go)
        })
    }
    res.end()
  }

  const http = createServer((req, res) => {
    responses.add(res)
    res.on('close', () => responses.delete(res))
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, jsonRpcError(-32603, String(error)))
      else res.destroy()
    })
  })
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject)
    http.listen(0, '127.0.0.1', () => {
      http.off('error', reject)
      resolve()
    })
  })
  const { port } = http.address() as AddressInfo

  let closed: Promise<void> | undefined

  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    authorizations,
    traceparents,
    tracestates,
    callsOf: (name) => calls.filter((call) => call.name === name),
    get connections() {
      return connections
    },
    failNext(name, message) {
      known(name)
      failures.set(name, [...(failures.get(name) ?? []), message])
    },
    delay(name, ms) {
      known(name)
      delays.set(name, ms)
    },
    breakNext(name, how) {
      known(name)
      breaks.set(name, [...(breaks.get(name) ?? []), how])
    },
    addTool(name, description, reply) {
      define({ name, description, inputSchema: z.looseObject({}), reply })
    },
    addFlood(name, bytes) {
      define({
        name,
        description: `Answer ${bytes} bytes of text.`,
        inputSchema: z.looseObject({}),
        reply: () => '',
      })
      const flood = { bytes, sent: 0, calls: 0 }
      floods.set(name, flood)
      return flood
    },
    close() {
      closed ??= (async () => {
        const stopped = new Promise<void>((resolve) => http.close(() => resolve()))
        // Delayed calls answer at once, then the sessions close their streams (the GET streams
        // included), the responses get a moment to flush, and whatever connection is left is cut.
        closing.abort()
        await Promise.allSettled([...inFlight])
        await new Promise((resolve) => setImmediate(resolve)) // the SDK sends their answers
        await Promise.allSettled([...sessions.values()].map((session) => session.server.close()))
        const flushed = [...responses].map(
          (res) => new Promise((resolve) => res.once('close', resolve)),
        )
        await Promise.race([Promise.all(flushed), sleep(500)])
        http.closeAllConnections()
        await stopped
      })()
      return closed
    },
  }
}

import { metrics } from '../../metrics.js'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { RunConnection } from '../../domain/tools/index.js'
import {
  egressFetch,
  egressRefusalOf,
  strictEgress,
  type EgressRule,
  type Fetch,
} from '../../egress.js'
import { outgoingHeaders, toolSpan, traceParentOf, type Trace } from '../../traces/index.js'
import type { Logger } from '../../log.js'
import type { ToolSpec } from '../models/index.js'
import { cappedFetch } from './answers.js'
import { shorten, storable } from '../../../shared/text.js'

// The tools of a run's MCP tool servers, over Streamable HTTP (DESIGN 6), named <connection>.<tool>.
// A call that fails on the way (no answer within the tool timeout, a connection cut, an answer that is
// not JSON-RPC) comes back to the model as a tool error in words it can act on; osd never makes the
// call again on its own (DESIGN 13): whether it took effect is the model's, and the person's, to judge.
// osd connects only where the egress rule allows, checked against each address it connects to and
// each redirect (server/egress.ts), and reads a tool result up to OSD_TOOL_RESULT_MAX_BYTES
// (answers.ts): runs and chats both call tools through here, so both keep those rules.

/** Where tool servers may be and how much of a result is read (Config.egress, toolResultMaxBytes). */
export interface ToolLimits {
  egress: EgressRule
  resultMaxBytes: number
}

/** Without a configuration: nothing private is reached, results are cut at the default 100 KB. */
export const defaultToolLimits: ToolLimits = { egress: strictEgress, resultMaxBytes: 100_000 }

interface Open {
  connection: RunConnection
  client: Client
  tools: Map<string, string>
  /** What fails the calls in flight when the transport reports an error (an answer it cannot read). */
  failing: Set<(err: Error) => void>
}

/**
 * The MCP SDK, loaded at the first connection to a tool server: with the JSON Schema validator it
 * brings (ajv), about 400 ms of a core and 120 modules, which a process that reaches no tool server (an
 * API process, an engine whose runs call none, most of the suite's osd processes) need not spend
 * (issue 40).
 */
async function mcpSdk(): Promise<Sdk> {
  return (sdk ??= Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]).then(([client, http, types]) => (loaded = { ...client, ...http, ...types })))
}
let sdk: Promise<Sdk> | undefined
/** The SDK once loaded: an McpError can only have come from it, after a connection loaded it. */
let loaded: Sdk | undefined
type Sdk = typeof import('@modelcontextprotocol/sdk/client/index.js') &
  typeof import('@modelcontextprotocol/sdk/client/streamableHttp.js') &
  typeof import('@modelcontextprotocol/sdk/types.js')

/** Unknown outcome: said with every failure that may have come after the server acted. */
const mayHaveActed = 'Whether the call took effect is unknown: check before trying it again.'

/** A call's failure, in words for the model. */
export function toolFailure(err: unknown, timeoutMs: number): string {
  const refused = egressRefusalOf(err)
  if (refused)
    return `osd may not connect to the tool server's address: ${refused.message}. ${mayHaveActed}`
  if (loaded && err instanceof loaded.McpError) {
    if (err.code === loaded.ErrorCode.RequestTimeout)
      return `The tool server did not answer within ${Math.round(timeoutMs / 1000)} s. ${mayHaveActed}`
    if (err.code === loaded.ErrorCode.ConnectionClosed)
      return `The tool server closed the connection during the call. ${mayHaveActed}`
    return `The tool server refused the call: ${err.message}`
  }
  const message = err instanceof Error ? err.message : String(err)
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause
  if (err instanceof SyntaxError || /JSON|parse/i.test(message))
    return `The tool server answered something that is not a tool result (${shorten(message, 200)}). ${mayHaveActed}`
  return `The tool server could not be reached or dropped the call (${cause?.code ?? cause?.message ?? message}). ${mayHaveActed}`
}

export interface ToolOutcome {
  content: string
  isError: boolean
}

export class McpTools {
  private open: Open[] = []

  constructor(
    private readonly connections: RunConnection[],
    private readonly log: Logger,
    /** The span the tools are used in (a run's pass, a chat's reply): their calls' parent (issue 49). */
    private readonly trace: Trace,
    /** The longest a call may take (OSD_TOOL_TIMEOUT_SECONDS). */
    private readonly timeoutMs = 120_000,
    private readonly limits: ToolLimits = defaultToolLimits,
  ) {}

  /** Connects to each tool server and lists its tools; a server that does not answer offers none. */
  async connect(): Promise<ToolSpec[]> {
    const specs: ToolSpec[] = []
    for (const connection of this.connections.filter((c) => c.kind === 'mcp' && c.url)) {
      let client: Client | undefined
      try {
        const { Client, StreamableHTTPClientTransport } = await mcpSdk()
        client = new Client({ name: 'osd', version: '1' })
        const cut = () =>
          this.log.warn(
            { connection: connection.name, maxBytes: this.limits.resultMaxBytes },
            'tool result cut at OSD_TOOL_RESULT_MAX_BYTES',
          )
        const transport = new StreamableHTTPClientTransport(new URL(connection.url!), {
          requestInit: connection.token
            ? { headers: { Authorization: `Bearer ${connection.token}` } }
            : undefined,
          fetch: tracedFetch(
            cappedFetch(egressFetch(this.limits.egress), this.limits.resultMaxBytes, cut),
            this.trace,
          ),
          // Redirects are followed by the egress fetch, each new connection checked against the
          // address it uses; undici drops the Authorization header on a redirect to another origin.
          redirectPolicy: 'follow',
        })
        const failing = new Set<(err: Error) => void>()
        client.onerror = (err) => {
          for (const fail of failing) fail(err)
        }
        await client.connect(transport, { timeout: 15_000 })
        const listed = await client.listTools(undefined, { timeout: 15_000 })
        const tools = new Map<string, string>()
        for (const tool of listed.tools) {
          const name = `${connection.name}.${tool.name}`
          tools.set(name, tool.name)
          specs.push({
            name,
            description: tool.description ?? `${tool.name} on ${connection.name}`,
            parameters: (tool.inputSchema as Record<string, unknown>) ?? {
              type: 'object',
              properties: {},
            },
          })
        }
        this.open.push({ connection, client, tools, failing })
      } catch (err) {
        // A session started and then no tool list (an error, no answer in time): the client is closed
        // here, as close() closes those it keeps, else its connection and the event stream it opened
        // once the session started stayed open, one more at each execution of each run.
        await client?.close().catch(() => undefined)
        this.log.warn(
          {
            err: egressRefusalOf(err)?.message ?? (err as Error).message,
            connection: connection.name,
          },
          'tool server did not answer; its tools are left out',
        )
      }
    }
    // In one order whatever order the connections were read in (their query orders by layer only) or
    // the servers list them: the tools open every model call's prompt, which must be the same bytes at
    // every call for the provider's cache to match it (DESIGN 13).
    return specs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  }

  /** Calls a tool of a tool server, in its `execute_tool` span (issue 49); `callId` is the model's. */
  call(
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
    callId?: string,
  ): Promise<ToolOutcome> {
    const open = this.open.find((o) => o.tools.has(name))
    // A name no server offers (a model's invention) makes no span: span names stay the tools'.
    if (!open) return Promise.resolve({ content: `No tool ${name} is connected.`, isError: true })
    const call = { name, callId, source: 'mcp' as const, arguments: args, trace: this.trace }
    return toolSpan(call, async (span) => {
      const { content, isError } = await this.callTool(open, name, args, signal, span.trace)
      // Kept (the journal, a chat's message) as text PostgreSQL can hold: a tool server's U+0000 or
      // half a surrogate pair becomes U+FFFD, else the call's answer could not be written and the run
      // or the reply stopped there until its lease lapsed, for good.
      const outcome = { content: storable(content), isError }
      span.result(outcome)
      return outcome
    })
  }

  private async callTool(
    open: Open,
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
    trace: Trace,
  ): Promise<ToolOutcome> {
    const began = performance.now()
    // The call's span, as MCP's _meta carries trace context (and tracedFetch sends it as the header).
    const traceparent = traceParentOf(trace)
    let ok = false
    let fail!: (err: Error) => void
    const failed = new Promise<never>((_, reject) => (fail = reject))
    open.failing.add(fail)
    try {
      const result = await Promise.race([
        open.client.callTool(
          {
            name: open.tools.get(name)!,
            arguments: args,
            ...(traceparent ? { _meta: { traceparent } } : {}),
          },
          undefined,
          {
            signal,
            timeout: this.timeoutMs,
          },
        ),
        failed,
      ])
      const content = ((result.content ?? []) as { type: string; text?: string }[])
        .map((part) => (part.type === 'text' ? part.text : `[${part.type}]`))
        .join('\n')
      ok = !result.isError
      return {
        content: content || (result.isError ? 'the tool failed' : 'done'),
        isError: Boolean(result.isError),
      }
    } catch (err) {
      if (signal.aborted) throw err
      this.log.warn({ err: (err as Error).message, tool: name }, 'tool call failed')
      return { content: toolFailure(err, this.timeoutMs), isError: true }
    } finally {
      open.failing.delete(fail)
      metrics.toolCall('mcp', ok, (performance.now() - began) / 1000)
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.open.map((o) => o.client.close().catch(() => undefined)))
    this.open = []
  }
}

/**
 * Sends a traceparent with each request to a tool server when tracing is on (issue 49), so a server
 * that traces joins the trace: a tool call's own span, which the call's _meta names (set by McpTools.
 * callTool, never by the model, whose arguments are a field beside it), else the span the tools are
 * used in (connecting, listing). Untraced, the request goes as it was. Never the tenant's to turn on:
 * the header names only ids of osd's own trace.
 */
function tracedFetch(fetch: Fetch, trace: Trace): Fetch {
  if (!trace) return fetch
  return (url, init) => {
    const carried = callTraceParent(init?.body)
    const headers = new Headers(init?.headers)
    for (const [name, value] of Object.entries(
      carried ? { traceparent: carried } : (outgoingHeaders(trace) ?? {}),
    ))
      headers.set(name, value)
    return fetch(url, { ...init, headers })
  }
}

/** The traceparent a tools/call request's _meta carries (callTool), if the body is one. */
function callTraceParent(body: unknown): string | undefined {
  if (typeof body !== 'string' || !body.includes('"traceparent"')) return undefined
  try {
    const message = JSON.parse(body) as {
      method?: string
      params?: { _meta?: { traceparent?: unknown } }
    }
    const sent = message.method === 'tools/call' ? message.params?._meta?.traceparent : undefined
    return typeof sent === 'string' ? sent : undefined
  } catch {
    return undefined
  }
}

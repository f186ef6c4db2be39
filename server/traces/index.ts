import type { Context } from '@opentelemetry/api'
import type { Logger } from '../log.js'
import type { AttributeValues, Kind, Parent, Protocol, Sdk } from './sdk.js'

// Traces (issue 49; DESIGN 15): what osd does, as OpenTelemetry spans sent over OTLP/HTTP to a
// collector. A leaf beside log.ts and metrics.ts: the seams (the HTTP request, a run's pass, a chat
// reply, the model call, a tool call, a gate's wait, admission, recall, the spend reservation) call
// the functions below without knowing whether anything listens. Off (no OTLP endpoint set, the
// default) every one of them is a check of one variable and a call of the work itself: this file
// imports nothing at run time, and the SDK (sdk.ts, with the semantic conventions' names) is loaded
// by startTraces only when tracing is on. docs/observability.md says what each span carries.
//
// A run is one trace across processes and time: its context (a W3C traceparent) is stored with the
// run at its start (runs.trace_parent), and every pass, whichever engine makes it and however long
// after a gate, continues it; a gate's wait is recorded at its decision from the gate's stored times.
//
// Within a process, a span's context (Trace) is handed down explicitly to the work inside it, as the
// run is: a seam names the span it is part of (`parent`), the lines it logs carry its ids through a
// logger made for it (traceLog), the requests it makes carry them onward (outgoingHeaders). Not
// AsyncLocalStorage, which on Node 20 costs every promise of the process (sdk.ts).

/** How tracing is configured (config.ts reads the standard OTEL_* variables into it). */
export interface TraceSettings {
  /** An OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). */
  enabled: boolean
  protocol: Protocol
  /** OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true: prompts, answers, tool arguments and results. */
  captureContent: boolean
}

declare const traced: unique symbol
/**
 * Where some work stands in a trace: the context of the span it is part of, for the spans, log lines
 * and requests it makes. Undefined when tracing is off, or outside any span.
 */
export type Trace = { readonly [traced]: true } | undefined

/** What a seam may say of its span once it knows (a status, tokens), and of its failure. */
export interface SpanHandle {
  /** The span's own context: the parent of the spans made inside it. */
  readonly trace: Trace
  set(attributes: AttributeValues): void
  /** Marks the span failed: `error.type` and an error status. */
  fail(type: string, message?: string): void
}

export type { AttributeValues }

const noSpan: SpanHandle = { trace: undefined, set() {}, fail() {} }

const traceOf = (context: Context) => context as unknown as Trace
const contextOf = (trace: Trace) => trace as unknown as Context | undefined
/** A span's parent as the SDK takes it: a Trace's context, or a stored traceparent as it is. */
const parentOf = (parent: Trace | string | null | undefined): Parent =>
  typeof parent === 'string' || parent == null ? parent : contextOf(parent)

let sdk: Sdk | undefined
let capture = false

export function tracingOn(): boolean {
  return sdk !== undefined
}

/**
 * Turns tracing on for this process (osd serve at start; a test file in its hook). Answers whether
 * this call turned it on: a later call while it is on changes nothing, and only the caller that
 * turned it on stops it.
 */
export async function startTraces(
  settings: TraceSettings,
  about: { version: string; role: string; warn: (fields: object, message: string) => void },
): Promise<boolean> {
  if (!settings.enabled || sdk) return false
  const { makeSdk } = await import('./sdk.js')
  if (sdk) return false
  const made = await makeSdk({ protocol: settings.protocol, ...about })
  if (sdk) {
    await made.stop(0)
    return false
  }
  sdk = made
  capture = settings.captureContent
  return true
}

/**
 * Sends the spans still held within `budgetMs` and stops (osd's stop: docs/configuration.md#shutdown);
 * this process is untraced again afterwards.
 */
export async function stopTraces(budgetMs = 1000): Promise<void> {
  const stopping = sdk
  sdk = undefined
  capture = false
  await stopping?.stop(budgetMs)
}

/** Sends every span ended so far (tests, before they read what a collector got). */
export async function flushTraces(): Promise<void> {
  await sdk?.flush()
}

export interface SpanOptions {
  /**
   * The span's parent: the span the work is part of (its Trace), a stored traceparent (a run's), or
   * none (null, left out): a new trace.
   */
  parent?: Trace | string | null
  kind?: Kind
}

/** Runs `fn` inside a span named `name`; a throw marks the span failed and goes on up. */
export function span<T>(
  name: string,
  attributes: AttributeValues,
  fn: (span: SpanHandle) => Promise<T>,
  options: SpanOptions = {},
): Promise<T> {
  if (!sdk) return fn(noSpan)
  const { fail } = sdk
  return sdk.span(
    name,
    attributes,
    (s, context) =>
      fn({
        trace: traceOf(context),
        set: (more) => void s.setAttributes(clean(more)),
        fail: (type, message) => fail(s, type, message),
      }),
    parentOf(options.parent),
    options.kind,
  )
}

/** A span that already happened (a gate's wait, an admission), with its times, under `parent`. */
export function recordSpan(
  name: string,
  attributes: AttributeValues,
  times: { start: Date; end: Date },
  parent: string | null,
): void {
  sdk?.record(name, attributes, times, parent)
}

/**
 * The HTTP request's span (SERVER): its parent is the caller's `traceparent` when well formed (a
 * malformed one is ignored: a new trace), named `{method} {route}` once the route that answered is known.
 */
export function requestSpan(
  method: string,
  header: (name: string) => string | undefined,
  fn: (
    span: SpanHandle & { answered(route: string | undefined, status: number): void },
  ) => Promise<void>,
): Promise<void> {
  if (!sdk) return fn({ ...noSpan, answered() {} })
  const { names, fail } = sdk
  const parent = sdk.extract(header)
  return sdk.spanIn(
    parent,
    method,
    { [names.ATTR_HTTP_REQUEST_METHOD]: method },
    'server',
    (s, context) =>
      fn({
        trace: traceOf(context),
        set: (more) => void s.setAttributes(clean(more)),
        fail: (type, message) => fail(s, type, message),
        answered(route, status) {
          if (route) {
            s.updateName(`${method} ${route}`)
            s.setAttribute(names.ATTR_HTTP_ROUTE, route)
          }
          s.setAttribute(names.ATTR_HTTP_RESPONSE_STATUS_CODE, status)
          // A server span fails on a 5xx only (HTTP conventions): a 4xx is the caller's.
          if (status >= 500) fail(s, String(status))
        },
      }),
  )
}

/** What a model call's span is told once the provider answered, or failed. */
export interface ModelSpan {
  /** traceparent (and tracestate) for the provider's request; none when off. */
  readonly headers: Record<string, string> | undefined
  answered(reply: ModelAnswer, costMicros: number): void
  failed(kind: string, message: string): void
}

export interface ModelAnswer {
  model: string
  usage: { input: number; output: number; cacheRead: number; cacheWrite: number }
  finishReason?: string | null
  text?: string | null
  toolCalls?: ToolCallMade[]
}

const noModelSpan: ModelSpan = { headers: undefined, answered() {}, failed() {} }

/** A message of a model call's prompt, as the engine sends it (domain/models/provider.ts's Message). */
export type PromptMessage =
  | { role: 'user'; text: string }
  | { role: 'assistant'; text: string | null; toolCalls: ToolCallMade[] }
  | { role: 'tool'; results: { callId: string; content: string; isError?: boolean }[] }

interface ToolCallMade {
  id: string
  name: string
  arguments: Record<string, unknown>
}

/** A message as the GenAI conventions' input messages hold it: its role and its parts. */
function inputMessage(message: PromptMessage) {
  if (message.role === 'user')
    return { role: 'user', parts: [{ type: 'text', content: message.text }] }
  if (message.role === 'assistant')
    return {
      role: 'assistant',
      parts: [
        ...(message.text ? [{ type: 'text', content: message.text }] : []),
        ...message.toolCalls.map(toolCallPart),
      ],
    }
  return {
    role: 'tool',
    parts: message.results.map((r) => ({
      type: 'tool_call_response',
      id: r.callId,
      response: r.content,
    })),
  }
}

const toolCallPart = (call: ToolCallMade) => ({
  type: 'tool_call',
  id: call.id,
  name: call.name,
  arguments: call.arguments,
})

/** The GenAI conventions' provider names of osd's two wire formats. */
const providerNames = { provider_a: 'anthropic', provider_b: 'openai' } as const

/**
 * A model call as the GenAI conventions' inference span (CLIENT): `chat {model}`, with the request's
 * model and token cap, the answer's model, tokens (input counting the cached ones, as the conventions
 * ask, and those read from and written to the cache apart), finish reason and `osd.cost_usd`. The
 * prompt and the answer only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
 */
export function modelSpan<T>(
  call: {
    provider: 'provider_a' | 'provider_b'
    model: string
    maxTokens: number
    streamed: boolean
    system: string
    messages: readonly PromptMessage[]
    /** The span the call is part of (a run's pass, a chat's reply). */
    trace: Trace
  },
  fn: (span: ModelSpan) => Promise<T>,
): Promise<T> {
  if (!sdk) return fn(noModelSpan)
  const n = sdk.names
  const attributes: AttributeValues = {
    [n.ATTR_GEN_AI_OPERATION_NAME]: n.GEN_AI_OPERATION_NAME_VALUE_CHAT,
    [n.ATTR_GEN_AI_PROVIDER_NAME]: providerNames[call.provider],
    [n.ATTR_GEN_AI_REQUEST_MODEL]: call.model,
    [n.ATTR_GEN_AI_REQUEST_MAX_TOKENS]: call.maxTokens,
    'osd.provider': call.provider,
    'osd.streamed': call.streamed,
  }
  if (capture) {
    attributes[n.ATTR_GEN_AI_SYSTEM_INSTRUCTIONS] = JSON.stringify([
      { type: 'text', content: call.system },
    ])
    attributes[n.ATTR_GEN_AI_INPUT_MESSAGES] = JSON.stringify(call.messages.map(inputMessage))
  }
  const { fail, headers } = sdk
  return sdk.span(
    `chat ${call.model}`,
    attributes,
    (s, context) =>
      fn({
        headers: headers(context),
        answered(reply, costMicros) {
          const { usage } = reply
          s.setAttributes(
            clean({
              [n.ATTR_GEN_AI_RESPONSE_MODEL]: reply.model,
              [n.ATTR_GEN_AI_USAGE_INPUT_TOKENS]: usage.input + usage.cacheRead + usage.cacheWrite,
              [n.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: usage.output,
              [n.ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]: usage.cacheRead,
              [n.ATTR_GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS]: usage.cacheWrite,
              [n.ATTR_GEN_AI_RESPONSE_FINISH_REASONS]: reply.finishReason
                ? [reply.finishReason]
                : undefined,
              'osd.cost_usd': costMicros / 1_000_000,
              [n.ATTR_GEN_AI_OUTPUT_MESSAGES]: capture
                ? JSON.stringify([
                    {
                      role: 'assistant',
                      parts: [
                        ...(reply.text ? [{ type: 'text', content: reply.text }] : []),
                        ...(reply.toolCalls ?? []).map(toolCallPart),
                      ],
                      finish_reason: reply.finishReason ?? undefined,
                    },
                  ])
                : undefined,
            }),
          )
        },
        failed: (kind, message) => fail(s, kind, message),
      }),
    parentOf(call.trace),
    'client',
  )
}

/** What a tool call's span is told of its outcome. */
export interface ToolSpan {
  /** The tool call's span (for the tool server's request: outgoingHeaders). */
  readonly trace: Trace
  result(outcome: { content: string; isError: boolean }): void
}

const noToolSpan: ToolSpan = { trace: undefined, result() {} }

/**
 * A tool call as the GenAI conventions' `execute_tool {name}` span: the tool's name, the call's id
 * (the model's), `osd.tool.source` (os: built in, mcp: a tool server), and error.type on a failure.
 * Arguments and result only with content capture on.
 */
export function toolSpan<T>(
  call: {
    name: string
    callId?: string
    source: 'os' | 'mcp'
    arguments: Record<string, unknown>
    /** The span the call is part of (a run's pass). */
    trace: Trace
  },
  fn: (span: ToolSpan) => Promise<T>,
): Promise<T> {
  if (!sdk) return fn(noToolSpan)
  const n = sdk.names
  const { fail } = sdk
  return sdk.span(
    `execute_tool ${call.name}`,
    {
      [n.ATTR_GEN_AI_OPERATION_NAME]: n.GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
      [n.ATTR_GEN_AI_TOOL_NAME]: call.name,
      [n.ATTR_GEN_AI_TOOL_CALL_ID]: call.callId,
      [n.ATTR_GEN_AI_TOOL_TYPE]: 'function',
      'osd.tool.source': call.source,
      [n.ATTR_GEN_AI_TOOL_CALL_ARGUMENTS]: capture ? JSON.stringify(call.arguments) : undefined,
    },
    (s, context) =>
      fn({
        trace: traceOf(context),
        result(outcome) {
          if (capture) s.setAttribute(n.ATTR_GEN_AI_TOOL_CALL_RESULT, outcome.content)
          if (outcome.isError) fail(s, 'tool_error')
        },
      }),
    parentOf(call.trace),
  )
}

/** A span's context as a W3C traceparent (to store with a run), when tracing is on. */
export function traceParentOf(trace: Trace): string | undefined {
  return sdk && trace ? sdk.headers(contextOf(trace)!)?.traceparent : undefined
}

/**
 * The trace context a new run is stored with when its starter gave none: a new trace whose root says
 * the run started (a schedule's fire, say). Undefined when tracing is off: the run has no trace.
 */
export function newRunTraceParent(attributes: AttributeValues): string | undefined {
  return sdk?.root('run start', attributes)?.traceparent
}

/** traceparent (and tracestate) for a request made inside a span (a tool call's); none when off. */
export function outgoingHeaders(trace: Trace): Record<string, string> | undefined {
  return sdk && trace ? sdk.headers(contextOf(trace)!) : undefined
}

/** The trace id of a stored traceparent (`00-<trace id>-<span id>-<flags>`). */
export function traceIdOf(traceParent: string | null | undefined): string | null {
  return traceParent ? traceParent.slice(3, 35) : null
}

/**
 * The logger for the lines written inside a span: `log` with the span's trace_id and span_id, as the
 * OpenTelemetry log data model names them, so that a collector links each line to its trace. `log`
 * itself outside any span, or when tracing is off.
 */
export function traceLog(log: Logger, trace: Trace): Logger {
  const ids = logFields(trace)
  return ids ? log.child(ids) : log
}

/** A span's trace_id and span_id as a log line's fields (traceLog), for a single line. */
export function logFields(trace: Trace): { trace_id: string; span_id: string } | undefined {
  return sdk && trace ? sdk.idsOf(contextOf(trace)!) : undefined
}

function clean(values: AttributeValues): Record<string, string | number | boolean | string[]> {
  const out: Record<string, string | number | boolean | string[]> = {}
  for (const key in values) if (values[key] !== undefined) out[key] = values[key]!
  return out
}

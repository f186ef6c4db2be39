import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  diag,
  DiagLogLevel,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api'
import {
  loggingErrorHandler,
  setGlobalErrorHandler,
  W3CTraceContextPropagator,
} from '@opentelemetry/core'
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources'
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base'
import {
  ATTR_ERROR_TYPE,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
} from '@opentelemetry/semantic-conventions'

// The OpenTelemetry SDK as osd uses it (issue 49), loaded by traces/index.ts only when an OTLP
// endpoint is set: off, not one of these modules is read. Our own spans at our own seams, no
// auto-instrumentation: a BasicTracerProvider with the sampler of OTEL_TRACES_SAMPLER(_ARG) (the SDK
// reads them), a BatchSpanProcessor (OTEL_BSP_*), the OTLP/HTTP exporter of the protocol asked for
// (it reads OTEL_EXPORTER_OTLP_* itself). No context manager: a span's context is handed explicitly to
// the work inside it (index.ts's Trace). AsyncLocalStorage would keep it for free to read, but on
// Node 20 it runs a hook at every promise the process makes, traced or not: half of what tracing cost
// a run (docs/observability.md, "What tracing costs"). Nothing is registered globally (no
// trace.setGlobalTracerProvider): the spans are made through this module's tracer only, so a test file
// can start and stop tracing while other files of the same worker run without it, and no library of
// ours reports into osd's traces behind our back.

export type Protocol = 'http/protobuf' | 'http/json'
export type Kind = 'server' | 'client' | 'internal'
export type AttributeValues = Record<string, string | number | boolean | string[] | undefined>
/** A span's parent: a live span's context, a stored traceparent, or none (null, undefined: a new trace). */
export type Parent = Context | string | null | undefined

export interface SdkOptions {
  protocol: Protocol
  version: string
  role: string
  /** Where the SDK's own complaints go (an export that fails), at most once a minute. */
  warn: (fields: Record<string, unknown>, message: string) => void
}

const kinds: Record<Kind, SpanKind> = {
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  internal: SpanKind.INTERNAL,
}

/** Attributes without the undefined ones (the SDK would warn of each). */
export function clean(values: AttributeValues): Attributes {
  const out: Attributes = {}
  for (const key in values) if (values[key] !== undefined) out[key] = values[key]
  return out
}

export type Sdk = Awaited<ReturnType<typeof makeSdk>>

/**
 * What an SDK error says in a line: its name and message, the status the collector answered and the
 * start of its answer (the reason, when it gives one), never its stack.
 */
function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err)
  const { code, data } = err as { code?: unknown; data?: unknown }
  const answer = typeof data === 'string' ? data.replace(/\s+/g, ' ').trim().slice(0, 200) : ''
  return `${err.name}: ${err.message}${code ? ` (${code})` : ''}${answer ? `: ${answer}` : ''}`
}

export async function makeSdk(options: SdkOptions) {
  const { OTLPTraceExporter } =
    options.protocol === 'http/json'
      ? await import('@opentelemetry/exporter-trace-otlp-http')
      : await import('@opentelemetry/exporter-trace-otlp-proto')
  const names = await import('./names.js')
  // The SDK speaks through diag: as it is made, of each variable it cannot read (a sampler it does not
  // know, say, for which it takes its default), every word logged; once made, of a batch it cannot send
  // (no collector there), at most once a minute. A line is at most 500 characters: a failed export's
  // error carries the collector's whole answer (up to 4 MB) and its stack, which the SDK's own error
  // handler would write out as one string.
  let starting = true
  let lastWarning = 0
  const complain = (message: string, ...args: unknown[]) => {
    const now = Date.now()
    if (!starting && now - lastWarning < 60_000) return
    lastWarning = now
    options.warn(
      { detail: args.map(String).join(' ').slice(0, 500) },
      `traces: ${message}`.slice(0, 500),
    )
  }
  const quiet = () => undefined
  diag.setLogger(
    { error: complain, warn: complain, info: quiet, debug: quiet, verbose: quiet },
    DiagLogLevel.WARN,
  )
  setGlobalErrorHandler((err) => complain(`export failed: ${errorText(err)}`))
  const propagator = new W3CTraceContextPropagator()
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector) over osd's own defaults.
  const resource = defaultResource()
    .merge(
      resourceFromAttributes({
        [ATTR_SERVICE_NAME]: 'osd',
        [ATTR_SERVICE_VERSION]: options.version,
        'osd.role': options.role,
      }),
    )
    .merge(detectResources({ detectors: [envDetector] }))
  const processor = new BatchSpanProcessor(new OTLPTraceExporter())
  const provider = new BasicTracerProvider({ resource, spanProcessors: [processor] })
  const tracer = provider.getTracer('osd', options.version)
  // What was said while starting holds back no later word (an export's first failure).
  starting = false
  lastWarning = 0

  /** A parent's context: a stored traceparent's is a remote parent, as a header would give it. */
  const contextOf = (parent: Parent): Context =>
    typeof parent === 'string'
      ? propagator.extract(ROOT_CONTEXT, { traceparent: parent }, defaultTextMapGetter)
      : (parent ?? ROOT_CONTEXT)

  /** A span's context as headers (traceparent, tracestate), or undefined outside any span. */
  const headersOf = (ctx: Context): Record<string, string> | undefined => {
    const carrier: Record<string, string> = {}
    propagator.inject(ctx, carrier, defaultTextMapSetter)
    return carrier.traceparent ? carrier : undefined
  }

  const fail = (span: Span, type: string, message?: string) => {
    span.setAttribute(ATTR_ERROR_TYPE, type)
    span.setStatus({ code: SpanStatusCode.ERROR, message })
  }

  async function spanIn<T>(
    parentContext: Context,
    name: string,
    attributes: AttributeValues,
    kind: Kind,
    fn: (span: Span, context: Context) => Promise<T>,
  ): Promise<T> {
    const span = tracer.startSpan(
      name,
      { kind: kinds[kind], attributes: clean(attributes) },
      parentContext,
    )
    try {
      return await fn(span, trace.setSpan(parentContext, span))
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err))
      span.recordException(error)
      fail(span, error.name || 'Error', error.message)
      throw err
    } finally {
      span.end()
    }
  }

  return {
    names,
    /**
     * Runs `fn` inside a new span, given the span and its context (for the spans and requests made inside
     * it); a throw marks it failed (error.type: the error's name) and goes on.
     */
    span<T>(
      name: string,
      attributes: AttributeValues,
      fn: (span: Span, context: Context) => Promise<T>,
      parent: Parent,
      kind: Kind = 'internal',
    ): Promise<T> {
      return spanIn(contextOf(parent), name, attributes, kind, fn)
    },
    spanIn,
    /** A span that has already happened (a gate's wait, an admission), recorded with its times. */
    record(
      name: string,
      attributes: AttributeValues,
      times: { start: Date; end: Date },
      parent: string | null,
    ): void {
      tracer
        .startSpan(
          name,
          { attributes: clean(attributes), startTime: times.start },
          contextOf(parent),
        )
        .end(times.end)
    },
    /**
     * A new trace for a run started outside any span (a schedule's fire, say): its root span, ended at
     * once; the run's passes are its children.
     */
    root(name: string, attributes: AttributeValues): Record<string, string> | undefined {
      const span = tracer.startSpan(name, { attributes: clean(attributes) }, ROOT_CONTEXT)
      span.end()
      return headersOf(trace.setSpan(ROOT_CONTEXT, span))
    },
    fail,
    /** A span's context as headers (traceparent, tracestate), undefined outside any span. */
    headers: (context: Context) => headersOf(context),
    /** The ids of a context's span, for a log line. */
    idsOf(context: Context): { trace_id: string; span_id: string } | undefined {
      const span = trace.getSpan(context)
      if (!span) return undefined
      const { traceId, spanId } = span.spanContext()
      return { trace_id: traceId, span_id: spanId }
    },
    /** The request span's context: the caller's traceparent (and tracestate) when well formed. */
    extract: (header: (name: string) => string | undefined): Context =>
      propagator.extract(ROOT_CONTEXT, header, {
        get: (get, key) => get(key),
        keys: () => ['traceparent', 'tracestate'],
      }),
    async flush(): Promise<void> {
      await provider.forceFlush()
    },
    /** Sends what is left within `budgetMs` (the stop budget), then stops, whatever is still unsent. */
    async stop(budgetMs: number): Promise<void> {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        provider.shutdown().catch(() => undefined),
        new Promise((resolve) => (timer = setTimeout(resolve, budgetMs))),
      ])
      clearTimeout(timer)
      diag.disable()
      setGlobalErrorHandler(loggingErrorHandler())
    },
  }
}

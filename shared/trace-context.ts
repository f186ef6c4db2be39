// The W3C Trace Context header (https://www.w3.org/TR/trace-context/#traceparent-header), as osctl
// checks what CI put in TRACEPARENT before sending it (issue 49): version 00, a 32-hex trace id and a
// 16-hex parent id, neither all zeros, and the flags, in lower case. The daemon's own check is the
// OpenTelemetry SDK's propagator (server/traces): a header it refuses starts a new trace.

const traceParentForm = /^00-(?!0{32}-)[0-9a-f]{32}-(?!0{16}-)[0-9a-f]{16}-[0-9a-f]{2}$/

/** `value` trimmed if it is a well-formed traceparent, else undefined. */
export function wellFormedTraceParent(value: string | undefined): string | undefined {
  const trimmed = value?.trim()
  return trimmed && traceParentForm.test(trimmed) ? trimmed : undefined
}

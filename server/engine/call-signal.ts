/**
 * Runs a model or tool call with a signal of its own that aborts with the run's. Some clients leave a
 * listener on the signal they are given once the call is over (the openai SDK, the MCP client): on the
 * run's own signal they would pile up, one more at each step, for as long as the run goes on.
 */
export async function withCallSignal<T>(
  run: AbortSignal,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const own = new AbortController()
  const abort = () => own.abort(run.reason)
  run.addEventListener('abort', abort, { once: true })
  if (run.aborted) abort()
  try {
    return await call(own.signal)
  } finally {
    run.removeEventListener('abort', abort)
  }
}

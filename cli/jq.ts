import type { Deps } from './deps.js'
import { CliError, exitCodes } from './errors.js'
import { runJq, type JqResult } from './jq-runtime.js'

// --jq EXPR on every command that prints JSON (issue 48): the command runs as with --json, what it
// prints on stdout is kept, and once it ends (however it ends: `osctl diff` prints its plan, then
// exits 1) that text goes through jq itself (npm jq-wasm, jq 1.7 compiled to WebAssembly: jq's own
// semantics, not a subset of ours; cli/jq-runtime.ts) as `jq -r EXPR` would read it, every JSON value
// of it in turn.
// Output therefore comes when the command ends, not as it goes. The result is written as any text for
// a person is: the server's control characters shown as escapes (cli/safe-text.ts), unless --json is
// also given.

export async function withJq(
  deps: Deps,
  expr: string,
  fn: (deps: Deps) => Promise<void>,
): Promise<void> {
  let printed = ''
  const jqDeps: Deps = {
    ...deps,
    globals: { ...deps.globals, json: true },
    out: { ...deps.out, json: true, write: (text) => void (printed += text) },
  }
  // The filter is compiled before the command runs, so that one jq refuses leaves nothing done (an
  // apply written, a run started). Over no input jq compiles it and runs it on nothing: a filter that
  // would fail or never end on data is not run here. The load is the one the real run uses after.
  await checkFilter(expr)
  let failure: unknown
  try {
    await fn(jqDeps)
  } catch (err) {
    failure = err
  }
  if (printed.trim() !== '') {
    let result: JqResult
    try {
      result = await runJq(printed, expr)
    } catch (err) {
      throw new CliError(`--jq: ${(err as Error).message}`, exitCodes.failed)
    }
    if (result.stdout !== '') deps.out.write(result.stdout)
    // As jq stops on a filter that fails on the data (after printing what came before, as here): a
    // usage error, in jq's words.
    if (result.status !== 0) throw refusal(result)
  }
  if (failure !== undefined) throw failure
}

/** jq's refusal of the filter: a usage error, in jq's first words. */
function refusal(result: JqResult): CliError {
  const said = result.stderr.trim().split('\n')[0] || `jq exited ${result.status}`
  return new CliError(`--jq: ${said}`, exitCodes.usage)
}

/** Throws jq's refusal when the filter does not compile (jq's own status for that, 3, or a usage 2). */
async function checkFilter(expr: string): Promise<void> {
  let result: JqResult
  try {
    result = await runJq('', expr)
  } catch (err) {
    throw new CliError(`--jq: ${(err as Error).message}`, exitCodes.failed)
  }
  if (result.status !== 0) throw refusal(result)
}

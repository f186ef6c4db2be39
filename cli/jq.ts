import type { Deps } from './deps.js'
import { CliError, exitCodes } from './errors.js'

// --jq EXPR on every command that prints JSON (issue 48): the command runs as with --json, what it
// prints on stdout is kept, and once it ends (however it ends: `osctl diff` prints its plan, then
// exits 1) that text goes through jq itself (npm jq-wasm, jq 1.7 compiled to WebAssembly: jq's own
// semantics, not a subset of ours) as `jq -r EXPR` would read it, every JSON value of it in turn.
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
  let failure: unknown
  try {
    await fn(jqDeps)
  } catch (err) {
    failure = err
  }
  if (printed.trim() !== '') {
    const jq = await import('jq-wasm')
    let result: string
    try {
      result = await jq.raw(printed, expr, ['-r'])
    } catch (err) {
      // As jq stops on a filter that does not compile or that fails: a usage error here.
      const said = (err as Error).message.replace(/^Failed to execute raw query: /, '').trim()
      throw new CliError(`--jq: ${said.split('\n')[0]}`, exitCodes.usage)
    }
    if (result !== '') deps.out.write(result.endsWith('\n') ? result : `${result}\n`)
  }
  if (failure !== undefined) throw failure
}

import { CommanderError } from 'commander'
import { isClosedPipe } from '../shared/pipes.js'
import { ApiRequestError, CliError, exitCodes } from './errors.js'
import { buildProgram } from './program.js'

// Every osctl command but `--version` starts here (main.ts). deps.js brings the profile store (conf,
// with ajv) and the HTTP client: it is loaded when a command acts, so --help and usage errors start
// without them.
const program = buildProgram(async (globals) => (await import('./deps.js')).makeDeps(globals))

try {
  await program.parseAsync(process.argv)
} catch (err) {
  process.exitCode = report(err)
}

/** Errors on stderr as `error: <code>: <message>`; with --json the API's body also goes to stdout. */
function report(err: unknown): number {
  // A reader that has gone is no failure (issue 27; main.ts ends the process on the stream's error).
  if (isClosedPipe(err)) return exitCodes.ok
  if (err instanceof CommanderError) {
    return ['commander.helpDisplayed', 'commander.version', 'commander.help'].includes(err.code)
      ? exitCodes.ok
      : exitCodes.usage
  }
  if (err instanceof ApiRequestError) {
    process.stderr.write(`error: ${err.code}: ${err.message} (${err.status})\n`)
    if (err.hint) process.stderr.write(`hint: ${err.hint}\n`)
    if (program.opts().json && err.body !== undefined) {
      process.stdout.write(JSON.stringify(err.body, null, 2) + '\n')
    }
    return err.exitCode
  }
  if (err instanceof CliError) {
    process.stderr.write(`error: ${err.message}\n`)
    if (err.hint) process.stderr.write(`hint: ${err.hint}\n`)
    return err.exitCode
  }
  process.stderr.write(`error: ${(err as Error)?.stack ?? String(err)}\n`)
  return exitCodes.failed
}

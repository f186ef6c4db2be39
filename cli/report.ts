import { CommanderError } from 'commander'
import { isClosedPipe } from '../shared/pipes.js'
import { ApiRequestError, CliError, exitCodes } from './errors.js'
import { safeText } from './safe-text.js'

/** Where a failure is told: the process's own streams, or a test's. */
export interface ReportStreams {
  stdout: { write(text: string): unknown }
  stderr: { write(text: string): unknown }
}

/**
 * A failed command's exit code (DESIGN 9), its words said on stderr as `error: <code>: <message>`;
 * with --json the API's body also goes to stdout. Commander has said its own usage errors already
 * (cli/program.ts): they only get their exit code, 2. An error's words often echo the server's text (a
 * name refused, a run's reason): their control characters are escaped (issue 41), line breaks kept.
 */
export function report(
  err: unknown,
  json: boolean,
  io: ReportStreams = { stdout: process.stdout, stderr: process.stderr },
): number {
  // A reader that has gone is no failure (issue 27; main.ts ends the process on the stream's error).
  if (isClosedPipe(err)) return exitCodes.ok
  if (err instanceof CommanderError) {
    return ['commander.helpDisplayed', 'commander.version', 'commander.help'].includes(err.code)
      ? exitCodes.ok
      : exitCodes.usage
  }
  const say = (line: string) => io.stderr.write(safeText(line, { multiline: true }) + '\n')
  if (err instanceof ApiRequestError) {
    say(`error: ${safeText(err.code)}: ${err.message} (${err.status})`)
    if (err.hint) say(`hint: ${err.hint}`)
    if (json && err.body !== undefined) io.stdout.write(JSON.stringify(err.body, null, 2) + '\n')
    return err.exitCode
  }
  if (err instanceof CliError) {
    // An error without words: the command has said what there was to say (a wait's summary).
    if (err.message) say(`error: ${err.message}`)
    if (err.hint) say(`hint: ${err.hint}`)
    return err.exitCode
  }
  say(`error: ${(err as Error)?.stack ?? String(err)}`)
  return exitCodes.failed
}

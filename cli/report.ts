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
 * A failed command's exit code (DESIGN 9), its words said on stderr as `error: <code>: <message>`.
 * Commander has said its own usage errors already (cli/program.ts): they only get their exit code, 2.
 * An error's words often echo the server's text (a name refused, a run's reason): their control
 * characters are escaped (issue 41), line breaks kept. With --json every failure is also JSON on stdout
 * (issue 51), so a pipeline reads one document whatever happened: the API's own error body when it
 * answered one, else the same shape, `{"error": <code>, "message", "hint"?, "exitCode"}`, with the
 * codes of errorCodes. A failure whose command has printed its JSON already (a wait's run) adds none.
 */
export function report(
  err: unknown,
  json: boolean,
  io: ReportStreams = { stdout: process.stdout, stderr: process.stderr },
): number {
  // A reader that has gone is no failure (issue 27; main.ts ends the process on the stream's error).
  if (isClosedPipe(err)) return exitCodes.ok
  const printJson = (body: unknown) => {
    if (json) io.stdout.write(JSON.stringify(body, null, 2) + '\n')
  }
  if (err instanceof CommanderError) {
    if (['commander.helpDisplayed', 'commander.version', 'commander.help'].includes(err.code))
      return exitCodes.ok
    printJson(errorBody(exitCodes.usage, err.message.replace(/^error: /, '')))
    return exitCodes.usage
  }
  const say = (line: string) => io.stderr.write(safeText(line, { multiline: true }) + '\n')
  if (err instanceof ApiRequestError) {
    // Said once: a message that names the status already (a 401's words) is not followed by it again.
    const status = err.message.includes(`(${err.status}`) ? '' : ` (${err.status})`
    say(`error: ${safeText(err.code)}: ${err.message}${status}`)
    if (err.hint) say(`hint: ${err.hint}`)
    const apiBody = typeof err.body === 'object' && err.body !== null
    if (!err.printed)
      printJson(
        apiBody ? err.body : errorBody(err.exitCode, `${err.message}${status}`, err.hint, err.code),
      )
    return err.exitCode
  }
  if (err instanceof CliError) {
    // An error without words: the command has said what there was to say (a wait's summary).
    if (err.message) say(`error: ${err.message}`)
    if (err.hint) say(`hint: ${err.hint}`)
    if (!err.printed) printJson(errorBody(err.exitCode, err.message, err.hint))
    return err.exitCode
  }
  // Not osctl's own words: a bug to report, with where it happened (never a user's mistake, which is
  // a CliError of one line).
  say(`error: ${(err as Error)?.stack ?? String(err)}`)
  printJson(errorBody(exitCodes.failed, (err as Error)?.message ?? String(err)))
  return exitCodes.failed
}

/** The code of a failure that is not the API's own, by exit code: what --json prints in `error`. */
export const errorCodes: Record<number, string> = {
  [exitCodes.failed]: 'failed',
  [exitCodes.usage]: 'usage',
  [exitCodes.unreachable]: 'unreachable',
  [exitCodes.auth]: 'credentials',
  [exitCodes.pending]: 'pending',
  [exitCodes.interrupted]: 'interrupted',
}

function errorBody(exitCode: number, message: string, hint?: string, code?: string) {
  return {
    error: code ?? errorCodes[exitCode] ?? 'failed',
    message,
    ...(hint ? { hint } : {}),
    exitCode,
  }
}

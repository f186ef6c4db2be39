// A reader that goes away (issue 27): `osctl members list | head -1`, `| grep -m1`, a `jq` that stops.
// Writing to a pipe nobody reads fails with EPIPE, which Node raises as an 'error' event on the stream;
// unhandled, it ends the process with a stack and exit 1. A command line that scripts build on stops
// quietly instead, exit 0, as `gh` does: the reader has what it wanted. Used by osctl and by osd's
// commands (not `osd serve`, whose logs are its own matter).

/** Whether a write failed because the reader of the pipe has gone. */
export function isClosedPipe(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'EPIPE'
}

/**
 * Ends the process, exit 0 and nothing printed, once a reader of `streams` has gone, whatever it was
 * doing (a follow's long-poll included). An exit code the command had already settled on (a usage
 * error whose words went to a closed pipe) stands. Any other failure to write is said once on stderr,
 * exit 1.
 */
export function exitQuietlyWhenReaderGoes(
  streams: NodeJS.WriteStream[] = [process.stdout, process.stderr],
  exit: (code: number) => void = (code) => process.exit(code),
): void {
  for (const stream of streams) {
    stream.on('error', (err: Error) => {
      if (isClosedPipe(err)) return exit(Number(process.exitCode ?? 0))
      if (stream !== process.stderr && !process.stderr.destroyed)
        process.stderr.write(`error: cannot write the output: ${err.message}\n`)
      exit(1)
    })
  }
}

// Exit codes (DESIGN 9; issue 51: a pipeline tells failures apart by them): 0 success, 1 the run failed
// or the API refused, 2 usage error or cancelled, 3 osd could not be reached or the URL is wrong (and
// any failure of `osctl diff`, kubectl's shape: its 1 means "something would change"), 4 no or bad
// credentials (401, 403), 8 still pending (a wait ran out of time), 130 a follow stopped by Ctrl+C (the
// shell's 128 + SIGINT; the run goes on).
export const exitCodes = {
  ok: 0,
  failed: 1,
  usage: 2,
  unreachable: 3,
  auth: 4,
  pending: 8,
  interrupted: 130,
} as const

/**
 * What each exit code means, and the commands that answer it beyond every command's 0, 1, 2, 3 and 4:
 * the table of docs/osctl.md (scripts/cli-reference.ts). test/cli/exit-codes.test.ts holds the
 * commands named here to the command tree, and osctl's sources to these codes.
 */
export const exitCodeTable: Record<
  keyof typeof exitCodes,
  { meaning: string; commands?: string[] }
> = {
  ok: { meaning: 'success; for `osctl diff`, nothing would change' },
  failed: {
    meaning:
      'the API refused or failed (`error: <code>: <message> (<status>)` on stderr), or a name matched nothing; a wait: the run failed or ended otherwise, the gate was decided otherwise or closed undecided by its run ending; `osctl diff`: something would change; `osctl health`: the daemon is degraded',
    commands: ['diff', 'runs wait', 'runs start', 'wait run', 'wait gate', 'health'],
  },
  usage: {
    meaning:
      'a usage error (an unknown command, option or profile, a bad value, a file that is not YAML, a `--jq` filter that fails, a run input the task lacks or does not declare, an id prefix shorter than 8 characters or matching several: `error: ambiguous run prefix 3f2a9c1e: matches 3 runs` and the matches), or cancelled',
  },
  unreachable: {
    meaning:
      "osd could not be reached (refused, timed out, an error answered without osd's JSON: a proxy's 502 while osd is down), or the URL is wrong (not an http(s) URL, or a path that does not end in /v1); `osctl diff`: any other failure too (kubectl's shape: its 1 means something would change)",
  },
  auth: {
    meaning: 'credentials: no token, or the daemon refused it (401) or what it asked for (403)',
  },
  pending: {
    meaning: "still pending: a wait's timeout passed first (the run or gate carries on in osd)",
    commands: ['runs wait', 'runs start', 'runs fork', 'wait run', 'wait gate'],
  },
  interrupted: {
    meaning:
      'Ctrl+C while following a run or a bulk operation: osctl stopped following, it goes on in osd (stderr names `osctl runs watch ID`, or `osctl api GET /runs/bulk/ID`, to follow it again)',
    commands: [
      'runs start',
      'runs wait',
      'runs watch',
      'runs fork',
      'wait run',
      'runs cancel',
      'runs retry',
    ],
  },
}

export class CliError extends Error {
  /** What to do about it, printed on a line of its own after the error. */
  hint?: string
  /**
   * The command has printed its JSON answer already (a wait prints the run, then exits 1 or 8): with
   * --json, report() adds no error document to stdout.
   */
  printed?: boolean
  constructor(
    message: string,
    readonly exitCode: number = exitCodes.failed,
  ) {
    super(message)
  }
}

/** A failure told after the command printed its answer (the run a wait ends with): no second JSON. */
export function afterAnswer(message: string, exitCode: number): CliError {
  return Object.assign(new CliError(message, exitCode), { printed: true })
}

/**
 * The daemon could not be reached at all (refused, reset, timed out: nothing was answered), or the URL
 * names no osd (not a URL; an answer that is not osd's): exit 3.
 */
export class UnreachableError extends CliError {
  constructor(message: string) {
    super(message, exitCodes.unreachable)
  }
}

export class UsageError extends CliError {
  constructor(message: string) {
    super(message, exitCodes.usage)
  }
}

export class AuthError extends CliError {
  constructor(message: string) {
    super(message, exitCodes.auth)
  }
}

/** No token from a flag, the environment or the profile: the same words wherever osctl needs one. */
export function noTokenError(): AuthError {
  return new AuthError(
    'no token configured: run `osctl auth login --url URL --token TOKEN` or set OSCTL_TOKEN',
  )
}

/** The API answered with an error status; `code` is the error code of either body shape. */
export class ApiRequestError extends CliError {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: unknown,
    exitCode: number = status === 401 || status === 403 ? exitCodes.auth : exitCodes.failed,
  ) {
    super(message, exitCode)
  }
}

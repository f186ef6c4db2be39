// Exit codes (DESIGN 9): 0 success, 1 the API refused or failed, 2 usage error or cancelled,
// 3 `osctl diff` failed (kubectl's shape: its 1 means "something would change"), 4 no or bad
// credentials, 8 still pending (a wait ran out of time).
export const exitCodes = { ok: 0, failed: 1, usage: 2, diffError: 3, auth: 4, pending: 8 } as const

/**
 * What each exit code means, and the commands that answer it beyond every command's 0, 1, 2 and 4:
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
      'the API refused or failed (`error: <code>: <message> (<status>)` on stderr); a wait: the run ended otherwise, the gate was decided otherwise; `osctl diff`: something would change; `osctl health`: the daemon is degraded',
    commands: ['diff', 'runs wait', 'wait run', 'wait gate', 'health'],
  },
  usage: {
    meaning:
      'a usage error (an unknown command or option, a bad value, a file that is not YAML, a `--jq` filter that fails), or cancelled',
  },
  diffError: {
    meaning: "`osctl diff` failed (kubectl's shape: its 1 means something would change)",
    commands: ['diff'],
  },
  auth: { meaning: 'no token, or the daemon refused it (401)' },
  pending: {
    meaning: "still pending: a wait's timeout passed first (the run or gate carries on in osd)",
    commands: ['runs wait', 'runs start', 'runs fork', 'wait run', 'wait gate'],
  },
}

export class CliError extends Error {
  /** What to do about it, printed on a line of its own after the error. */
  hint?: string
  constructor(
    message: string,
    readonly exitCode: number = exitCodes.failed,
  ) {
    super(message)
  }
}

/** The daemon could not be reached at all (refused, reset, timed out): nothing was answered. */
export class UnreachableError extends CliError {}

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
  ) {
    super(message, status === 401 ? exitCodes.auth : exitCodes.failed)
  }
}

// Exit codes (DESIGN 9): 0 success, 1 the API refused or failed, 2 usage error or cancelled,
// 3 `osctl diff` failed (kubectl's shape: its 1 means "something would change"), 4 no or bad
// credentials, 8 still pending (a wait ran out of time).
export const exitCodes = { ok: 0, failed: 1, usage: 2, diffError: 3, auth: 4, pending: 8 } as const

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

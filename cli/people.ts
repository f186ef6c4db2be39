import { apiError, decode, type ApiClient, type RawAnswer } from './client.js'
import type { Deps } from './deps.js'
import type { MyEnterprise, User } from '../shared/schemas/people.js'
import { ApiRequestError, AuthError, type CliError } from './errors.js'
import { safeText } from './safe-text.js'

// The people side of osctl (issue 20): a person signs in with an email and a password, and the
// portal-only routes (spec: Portal-only routes) answer that person's session, never an API token.

/** A person, an enterprise with the person's role there, and the sign-in and session answers. */
export type {
  LoginAnswer,
  Me,
  MyEnterprise as PersonEnterprise,
  User as Person,
} from '../shared/schemas/people.js'

export const signInCommand = '`osctl auth login --email EMAIL`'

/** The refusals a token hears on the portal-only routes (spec: Authentication 6-7). */
const tokenRefusals = new Set([
  'api_token_cannot_manage_tokens',
  'api_token_cannot_manage_connections',
  'api_token_scope',
])

/**
 * Calls portal-only routes, which answer a person's session only. A refusal keeps the API's words
 * (exit 4: credentials) and gains a hint: a token's refusal says a person must sign in; a session that has ended
 * says to sign in again.
 */
export async function asPerson<T>(deps: Deps, call: (client: ApiClient) => Promise<T>): Promise<T> {
  const target = deps.target()
  if (!target.token)
    throw new AuthError(`not signed in (profile "${target.profile}"): run ${signInCommand}`)
  try {
    return await call(deps.client())
  } catch (err) {
    if (err instanceof ApiRequestError) {
      if (err.status === 403 && target.kind === 'token' && tokenRefusals.has(err.code)) {
        err.hint = `API tokens cannot do this: a person must sign in with ${signInCommand}`
      } else if (err.status === 403 && err.code === 'owner_only') {
        err.hint = 'only an owner of the enterprise may do this'
      } else if (err.status === 401 && target.kind === 'session') {
        err.hint = `the session has ended (signed out, expired or revoked): sign in again with ${signInCommand}`
      }
    }
    throw err
  }
}

/** A person in words: "Ada Lovelace <ada@example.com>", or the email alone (escaped: issue 41). */
export function personText(user: Pick<User, 'email'> & { name: string | null }): string {
  return safeText(user.name ? `${user.name} <${user.email}>` : user.email)
}

/** An enterprise and the person's role there, in words. */
export function enterpriseText(enterprise: MyEnterprise | null): string {
  return enterprise ? safeText(`${enterprise.slug} (${enterprise.role})`) : '(none chosen)'
}

/**
 * The answer of a route served without a credential (sign-in, an app's consent request), which
 * ApiClient.request would not send without one. An error status is `refused`'s to word (default: the
 * API's own refusal).
 */
export function publicAnswer<T>(
  answer: RawAnswer,
  refused: (err: ApiRequestError) => CliError = (err) => err,
): T {
  const parsed = decode(answer)
  if (answer.status >= 400) throw refused(apiError(answer.status, parsed))
  return parsed as T
}

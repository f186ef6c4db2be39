// Who calls: what auth.ts learns from the credential (an API token, or a person's session), kept by the
// caches (caches.ts) and carried by every request (context.ts, which holds the caches).

import { ApiError } from '../../shared/errors.js'
import type { PersonRole } from '../../shared/schemas/people.js'

/** What a request learns about its caller (spec: Authentication; DESIGN 8). */
export type Caller = {
  /** The enterprise it acts in. */
  enterpriseId: string
  /** A session holds every scope of its enterprise. */
  scopes: ReadonlySet<string>
  /** Who did it, as recorded on what it changes: `token:<id>` or `user:<id>`. */
  actor: string
} & (
  | {
      kind: 'token'
      tokenId: string
      /** Until when its secret signs in, in ms (its expiry, the end of its grace); null: no end. */
      validUntil?: number | null
    }
  | {
      kind: 'session'
      sessionId: string
      userId: string
      /** owner: the chief executive of the enterprise. */
      role: PersonRole
    }
)

/** The session caller of a portal route; 403 for a token (the middleware refuses them before). */
export type SessionCaller = Extract<Caller, { kind: 'session' }>

/** The caller as a person's session; 403 api_token_scope for a token (the middleware refuses them first). */
export function sessionCaller(caller: Caller): SessionCaller {
  if (caller.kind !== 'session')
    throw new ApiError(
      'api_token_scope',
      'This route is for signed-in people; API tokens cannot use it.',
    )
  return caller
}

/** The caller as a session of an owner of its enterprise (the chief executive); else 403 owner_only. */
export function ownerCaller(caller: Caller): SessionCaller {
  const person = sessionCaller(caller)
  if (person.role !== 'owner')
    throw new ApiError('owner_only', 'Only an owner of the enterprise may do this.')
  return person
}

/**
 * 403 api_token_scope unless the caller also holds `scope`: for a route whose path asks one scope
 * (the rule of DESIGN 4) but which changes what another guards too, as a model's price moves what
 * the spend caps hold back. A person's session holds every scope of its enterprise.
 */
export function requireScope(caller: Caller, scope: string): void {
  if (caller.scopes.has(scope)) return
  throw new ApiError(
    'api_token_scope',
    `This route also needs the scope ${scope}; the token holds ${[...caller.scopes].join(', ') || 'none'}.`,
    { needed: scope, held: [...caller.scopes] },
  )
}

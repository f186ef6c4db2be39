// Who calls: what auth.ts learns from the credential (an API token, or a person's session), kept by the
// caches (caches.ts) and carried by every request (context.ts, which holds the caches).

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
  | { kind: 'token'; tokenId: string }
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

import type { FoundSession } from '../domain/people/index.js'
import type { Trace } from '../traces/index.js'
import type { Caller } from './caller.js'

// What a request carries through the middleware (Hono's Variables), apart from context.ts so that the
// middleware of limits.ts, which context.ts names, can read it without an import circle.

export interface AppEnv {
  Variables: {
    requestId: string
    /** The parsed JSON body; undefined when there is none or it is not sent as application/json. */
    body: unknown
    caller: Caller
    /** The person's session, when the credential is one (also when it acts in no enterprise). */
    session: FoundSession | undefined
    /** The client's address, once http/limits.ts has worked it out. */
    clientAddress: string | undefined
    /**
     * The challenge a 401 of this request carries in WWW-Authenticate (errors.ts), when it is not the
     * plain `Bearer`: set where the refusal is decided (a bearer credential refused, a webhook secret).
     */
    challenge: string | undefined
    /** The request's span (issue 49), when traced: what the request starts is part of its trace. */
    trace: Trace
  }
}

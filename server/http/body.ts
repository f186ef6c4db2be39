import type { Context, MiddlewareHandler, Next } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { ApiError } from '../../shared/errors.js'
import { unstorable } from '../../shared/text.js'
import type { AppEnv } from './context.js'
import { requestHeader } from './headers.js'

/** Spec, Limits: a request body over 100 KB answers 413, with or without a content-length. */
export const maxBodyBytes = 100 * 1024

const limit = bodyLimit({
  maxSize: maxBodyBytes,
  onError: () => {
    throw new ApiError('body_too_large', 'The request body is over 100 KB.')
  },
})

// GET and HEAD carry no body. Skipping them matters: touching c.req.raw makes the node adapter build
// a full Request (with its AbortSignal) for every call, which costs more than the rest of a cached read.
const hasNoBody = (method: string) => method === 'GET' || method === 'HEAD'

const jsonType = /^application\/json\s*(;|$)/i

/**
 * The body, limited to 100 KB, then read once for the whole request as JSON (spec: Common conventions;
 * Limits): only a body sent as application/json is read as JSON; invalid JSON answers 400; an empty
 * body is no body.
 */
export const readBody: MiddlewareHandler<AppEnv> = (c, next) =>
  hasNoBody(c.req.method) ? next() : limit(c, () => parseJson(c, next))

async function parseJson(c: Context<AppEnv>, next: Next): Promise<void> {
  if (c.req.raw.body && jsonType.test(requestHeader(c, 'content-type') ?? '')) {
    const text = await c.req.text()
    if (text.trim() !== '') {
      if (nestedDeeper(text, maxDepth))
        throw new ApiError(
          'invalid_json',
          `The request body is nested deeper than ${maxDepth} levels of objects and arrays.`,
        )
      let body: unknown
      try {
        body = JSON.parse(text)
      } catch {
        throw new ApiError('invalid_json', 'The request body is not valid JSON.')
      }
      // PostgreSQL's jsonb cannot hold U+0000 or half of a surrogate pair, so such a body could never
      // be stored; only a \u escape can put either in (UTF-8 text cannot), so most bodies skip the walk.
      if (escapes.test(text) && holdsUnstorable(body))
        throw new ApiError(
          'invalid_json',
          'The request body holds \\u0000 or an unpaired surrogate (\\ud800-\\udfff), which cannot be stored.',
        )
      c.set('body', body)
    }
  }
  await next()
}

/**
 * Objects and arrays nest at most this deep in a body: nothing the API takes needs more, and a value
 * thousands of levels deep overflows the stack of whatever walks it (the JSON writer of the database
 * driver first).
 */
export const maxDepth = 100

/** Whether the JSON `text` opens more than `limit` objects and arrays inside one another. */
function nestedDeeper(text: string, limit: number): boolean {
  if (text.length <= limit * 2) return false // too short to hold that many pairs of brackets
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c)
        i++ // a backslash escapes the next character
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true
    } else if (c === 0x7d || c === 0x5d) depth--
  }
  return false
}

const escapes = /\\u(0000|d[89a-f])/i

function holdsUnstorable(value: unknown): boolean {
  if (typeof value === 'string') return unstorable(value)
  if (Array.isArray(value)) return value.some(holdsUnstorable)
  if (value && typeof value === 'object')
    return Object.entries(value).some(([key, v]) => unstorable(key) || holdsUnstorable(v))
  return false
}

import type { Context, MiddlewareHandler, Next } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { ApiError } from '../../shared/errors.js'
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
      let body: unknown
      try {
        body = JSON.parse(text)
      } catch {
        throw new ApiError('invalid_json', 'The request body is not valid JSON.')
      }
      // PostgreSQL's jsonb cannot hold U+0000 or half of a surrogate pair, so such a body could never
      // be stored; only a \u escape can put either in (UTF-8 text cannot), so most bodies skip the walk.
      if (escapes.test(text) && unstorable(body))
        throw new ApiError(
          'invalid_json',
          'The request body holds \\u0000 or an unpaired surrogate (\\ud800-\\udfff), which cannot be stored.',
        )
      c.set('body', body)
    }
  }
  await next()
}

const escapes = /\\u(0000|d[89a-f])/i
const unstorableText = /\0|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

function unstorable(value: unknown): boolean {
  if (typeof value === 'string') return unstorableText.test(value)
  if (Array.isArray(value)) return value.some(unstorable)
  if (value && typeof value === 'object')
    return Object.entries(value).some(([key, v]) => unstorableText.test(key) || unstorable(v))
  return false
}

import type { MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { ApiError } from '../../shared/errors.js'
import type { AppEnv } from './context.js'

/** Spec, Limits: a request body over 100 KB answers 413, with or without a content-length. */
export const maxBodyBytes = 100 * 1024

export const limitBody: MiddlewareHandler<AppEnv> = bodyLimit({
  maxSize: maxBodyBytes,
  onError: () => {
    throw new ApiError('body_too_large', 'The request body is over 100 KB.')
  },
})

const jsonType = /^application\/json\s*(;|$)/i

/**
 * Reads a JSON body once for the whole request (spec: Common conventions): only a body sent as
 * application/json is read as JSON; invalid JSON answers 400; an empty body is no body.
 */
export const parseJsonBody: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (c.req.raw.body && jsonType.test(c.req.header('content-type') ?? '')) {
    const text = await c.req.text()
    if (text.trim() !== '') {
      try {
        c.set('body', JSON.parse(text))
      } catch {
        throw new ApiError('invalid_json', 'The request body is not valid JSON.')
      }
    }
  }
  return next()
}

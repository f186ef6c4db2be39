import type { Context, MiddlewareHandler, Next } from 'hono'
import type { IncomingMessage } from 'node:http'
import { bodyLimit } from 'hono/body-limit'
import { ApiError } from '../../shared/errors.js'
import { configBodyMaxBytes } from '../../shared/schemas/config.js'
import { storable, unstorable } from '../../shared/text.js'
import type { AppEnv } from './env.js'
import { routeOf } from './methods.js'
import { requestHeader } from './headers.js'

/** Spec, Limits: a request body over 100 KB answers 413, with or without a content-length. */
export const maxBodyBytes = 100 * 1024

/**
 * Beyond the spec, which has no such routes: a plan or an apply of documents carries a whole
 * enterprise (issue 48), larger than any other body.
 */
const largeBodies = new Map([
  ['/v1/config/plan', configBodyMaxBytes],
  ['/v1/config/apply', configBodyMaxBytes],
])

const limitOf = (path: string) => largeBodies.get(path) ?? maxBodyBytes

const limiters = new Map(
  [maxBodyBytes, configBodyMaxBytes].map((maxSize) => [
    maxSize,
    bodyLimit({
      maxSize,
      onError: () => {
        throw tooLarge(maxSize)
      },
    }),
  ]),
)

// GET and HEAD carry no body. Skipping them matters: touching c.req.raw makes the node adapter build
// a full Request (with its AbortSignal) for every call, which costs more than the rest of a cached read.
const hasNoBody = (method: string) => method === 'GET' || method === 'HEAD'

const jsonType = /^application\/json\s*(;|$)/i

/**
 * Routes that read their body themselves (readRouteBody), once they know the caller: the inbound
 * webhooks, whose credential (the secret) their route checks. A caller osd does not know makes it read
 * no body (issue 44), there as on the routes of a token.
 */
const readByRoute = new Set([
  '/v1/webhooks/:enterprise/tasks/:task',
  '/v1/webhooks/:enterprise/gates/:gateId',
])

/**
 * The body, limited to 100 KB, then read once for the whole request as JSON (spec: Common conventions;
 * Limits): only a body sent as application/json is read as JSON; invalid JSON answers 400; an empty
 * body is no body.
 */
export const readBody: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (hasNoBody(c.req.method)) return next()
  const route = routeOf(c)
  if (route && readByRoute.has(route.path)) return next()
  return readInto(c, next)
}

/** For a route of readByRoute: its body, read as readBody reads the others' (into c.var.body). */
export async function readRouteBody(c: Context<AppEnv>): Promise<unknown> {
  if (!hasNoBody(c.req.method)) await readInto(c, async () => undefined)
  return c.get('body')
}

async function readInto(c: Context<AppEnv>, next: Next): Promise<Response | void> {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming
  const max = limitOf(c.req.path)
  if (!incoming) return limiters.get(max)!(c, () => parseJson(c, next))
  // Any body that says it is too large is refused, JSON or not (as bodyLimit does).
  if (Number(incoming.headers['content-length']) > max) {
    incoming.resume()
    throw tooLarge(max)
  }
  return parseJson(c, next, () => readIncoming(incoming, max))
}

async function parseJson(
  c: Context<AppEnv>,
  next: Next,
  read: () => Promise<string | undefined> = async () => (c.req.raw.body ? c.req.text() : undefined),
): Promise<void> {
  if (jsonType.test(requestHeader(c, 'content-type') ?? '')) {
    const text = await read()
    if (text !== undefined && text.trim() !== '') {
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
      // be stored; and a number past ±1.8e308 reads as Infinity, which would be stored as null. Only a
      // \u escape can put either character in (UTF-8 text cannot), and only a three-digit exponent or
      // 309 digits such a number, so most bodies skip the walk.
      const found = (escapes.test(text) || hugeNumbers.test(text)) && unreadableIn(body, '')
      if (found && found.what === 'number')
        throw new ApiError(
          'invalid_json',
          `The request body holds a number past ±1.8e308, which cannot be read, at ${found.at || 'its top'}.`,
        )
      if (found)
        throw new ApiError(
          'invalid_json',
          `The request body holds \\u0000 or an unpaired surrogate (\\ud800-\\udfff) at ${found.at || 'its top'}, which cannot be stored.`,
        )
      c.set('body', body)
    }
  }
  await next()
}

const tooLarge = (max = maxBodyBytes) =>
  new ApiError(
    'body_too_large',
    `The request body is over ${max >= 1024 * 1024 ? `${max / (1024 * 1024)} MB` : `${max / 1024} KB`}.`,
  )

/**
 * The body as text, read from node's own request under `osd serve` (issue 30): through Hono's request
 * the node adapter turns the body into a web stream and reads it back through its readers, a few
 * percent of the CPU of a start. At most 100 KB, whether or not a content-length says so: past it the
 * rest is read and dropped, so that the 413 can be answered on the same connection.
 */
function readIncoming(incoming: IncomingMessage, max: number): Promise<string | undefined> {
  if (incoming.readableEnded) return Promise.resolve(undefined)
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= max) return void chunks.push(chunk)
      incoming.off('data', onData)
      incoming.resume()
      reject(tooLarge(max))
    }
    incoming.on('data', onData)
    incoming.once('end', () => resolve(Buffer.concat(chunks, size).toString('utf8')))
    incoming.once('error', reject)
  })
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
const hugeNumbers = /\d[eE]\+?0*\d{3}|\d{309}/

/**
 * The first value of a parsed body that cannot be kept as sent, and where (`deep[0].x`, '' for the
 * body itself): text (a string or a key) holding what no column can hold, or a number JSON.parse read
 * as ±Infinity.
 */
function unreadableIn(
  value: unknown,
  at: string,
): { what: 'text' | 'number'; at: string } | undefined {
  if (typeof value === 'string') return unstorable(value) ? { what: 'text', at } : undefined
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : { what: 'number', at }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unreadableIn(value[i], `${at}[${i}]`)
      if (found) return found
    }
  } else if (value && typeof value === 'object') {
    for (const [key, v] of Object.entries(value)) {
      const path = at ? `${at}.${storable(key)}` : storable(key)
      const found = unstorable(key) ? { what: 'text' as const, at: path } : unreadableIn(v, path)
      if (found) return found
    }
  }
  return undefined
}

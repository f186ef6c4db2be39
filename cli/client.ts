import type { Dispatcher } from 'undici'
import { ApiRequestError, UnreachableError, exitCodes, noTokenError } from './errors.js'

export type Query = Record<string, string | number | boolean | undefined>

export interface RequestOptions {
  query?: Query
  body?: unknown
  signal?: AbortSignal
  /** Headers of a route's own (x-osd-poll-token); never authorization, which is the client's. */
  headers?: Record<string, string>
}

export interface RawAnswer {
  status: number
  contentType: string
  body: Buffer
}

/** The header on answers to a token that expires: when (server/http/auth.ts). */
export const tokenExpiresHeader = 'x-osd-token-expires-at'

/** The one HTTP client of osctl (DESIGN 9): base URL, token, error decoding, paging. */
export class ApiClient {
  /** When the token expires, as the daemon's last answer said; undefined for a token without expiry. */
  tokenExpiresAt: string | undefined

  /** `baseUrl` as apiBaseUrl() makes it: an unusable one throws (exit 3) before anything is sent. */
  readonly baseUrl: string

  constructor(
    baseUrl: string,
    readonly token: string | undefined,
    private readonly dispatcher?: Dispatcher,
    /** Where the URL came from, for the words of a refusal: `--url`, `OSCTL_URL`, `profile "p"`. */
    from?: string,
  ) {
    this.baseUrl = apiBaseUrl(baseUrl, from)
  }

  /** `path` is relative to the base URL (which ends in /v1); a leading /v1 is accepted too. */
  url(path: string, query?: Query): string {
    const base = this.baseUrl.replace(/\/+$/, '')
    const relative = base.endsWith('/v1') ? path.replace(/^\/?v1(?=\/|$)/, '') : path
    const url = new URL(base + (relative.startsWith('/') ? relative : `/${relative}`))
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== '') url.searchParams.set(key, String(value))
    }
    return url.toString()
  }

  /** Sends a request and answers status, content type and bytes, whatever the status. */
  async raw(method: string, path: string, options: RequestOptions = {}): Promise<RawAnswer> {
    const headers: Record<string, string> = { ...options.headers, accept: 'application/json' }
    if (this.token) headers.authorization = `Bearer ${this.token}`
    let body: string | undefined
    if (options.body !== undefined) {
      body = JSON.stringify(options.body)
      headers['content-type'] = 'application/json'
    }
    const target = this.url(path, options.query)
    // undici is loaded by the first request, not as osctl starts (a fifth of its start-up otherwise):
    // command modules import this one for decode() and apiError() while only building --help.
    const { request } = await import('./http.js')
    try {
      const res = await request(
        target,
        {
          method: method.toUpperCase() as Dispatcher.HttpMethod,
          headers,
          body,
          signal: options.signal,
        },
        this.dispatcher,
      )
      const bytes = Buffer.from(await res.body.arrayBuffer())
      const expires = res.headers[tokenExpiresHeader]
      if (typeof expires === 'string') this.tokenExpiresAt = expires
      return {
        status: res.statusCode,
        contentType: String(res.headers['content-type'] ?? ''),
        body: bytes,
      }
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err
      throw unreachable(this.baseUrl, err)
    }
  }

  /** Sends a request and decodes the JSON answer; an error status throws ApiRequestError. */
  async request<T = unknown>(
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<T> {
    if (!this.token) {
      throw noTokenError()
    }
    const answer = await this.raw(method, path, options)
    const parsed = decode(answer)
    if (answer.status >= 400) throw apiError(answer.status, parsed, this.baseUrl)
    return parsed as T
  }

  /**
   * Opens a streamed answer (GET, text/event-stream unless `accept` says otherwise) and resolves once
   * its headers are in, with its body to read as it comes. An error status throws as request() does;
   * the signal ends the stream.
   */
  async stream(
    path: string,
    options: RequestOptions & { accept?: string } = {},
  ): Promise<AsyncIterable<Buffer>> {
    if (!this.token) throw noTokenError()
    const headers: Record<string, string> = {
      ...options.headers,
      accept: options.accept ?? 'text/event-stream',
      authorization: `Bearer ${this.token}`,
    }
    const { request } = await import('./http.js')
    let res: Dispatcher.ResponseData
    try {
      res = await request(
        this.url(path, options.query),
        {
          method: 'GET',
          headers,
          signal: options.signal,
          // A stream is quiet between events (the daemon pings); the reader watches for silence.
          bodyTimeout: 0,
        },
        this.dispatcher,
      )
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err
      throw unreachable(this.baseUrl, err)
    }
    if (res.statusCode >= 400) {
      const body = Buffer.from(await res.body.arrayBuffer())
      const contentType = String(res.headers['content-type'] ?? '')
      throw apiError(
        res.statusCode,
        decode({ status: res.statusCode, contentType, body }),
        this.baseUrl,
      )
    }
    return res.body
  }

  /** A GET; the signal ends it (a follow stopped by Ctrl+C ends its long-poll at once). */
  get<T = unknown>(path: string, query?: Query, signal?: AbortSignal): Promise<T> {
    return this.request<T>('GET', path, { query, signal })
  }
  post<T = unknown>(path: string, body?: unknown): Promise<T> {
    return this.request<T>('POST', path, { body })
  }
  put<T = unknown>(path: string, body?: unknown): Promise<T> {
    return this.request<T>('PUT', path, { body })
  }
  patch<T = unknown>(path: string, body?: unknown): Promise<T> {
    return this.request<T>('PATCH', path, { body })
  }
  delete<T = unknown>(path: string, query?: Query): Promise<T> {
    return this.request<T>('DELETE', path, { query })
  }

  /**
   * Every record of a paged list, page after page (osctl ... list --all). Pages are of the largest
   * size unless `query.limit` asks for another. `key` names the array of a list that pages in a shape
   * of its own (memory: `{notes, page, limit, total}`).
   */
  async all<T>(path: string, query: Query = {}, key = 'data'): Promise<T[]> {
    const rows: T[] = []
    for (let page = 1; ; page++) {
      const answer = await this.get<PageOf>(path, { ...query, page, limit: query.limit ?? 200 })
      const records = (answer[key] ?? []) as T[]
      rows.push(...records)
      if (page >= pageCount(answer) || records.length === 0) return rows
    }
  }
}

/** A page of a list: its records under some key (`data` mostly), with page, limit and total. */
export interface PageOf {
  page: number
  limit: number
  total: number
  pages?: number
  [key: string]: unknown
}

/** How many pages a list has: its `pages`, or for the lists that leave it out, total over limit. */
export function pageCount(answer: { pages?: number; total: number; limit: number }): number {
  if (typeof answer.pages === 'number') return answer.pages
  return answer.limit > 0 ? Math.max(1, Math.ceil(answer.total / answer.limit)) : 1
}

export function decode(answer: RawAnswer): unknown {
  const text = answer.body.toString('utf8')
  if (!answer.contentType.includes('json')) return text
  try {
    return text ? JSON.parse(text) : undefined
  } catch {
    return text
  }
}

/**
 * Reads the code out of either error shape (spec: Errors, Two body shapes). An error answered without a
 * JSON object is not osd's (osd answers every error so): a proxy's 502 while osd is down, or another
 * server at the URL; given the `baseUrl` asked, it exits 3 (issue 51: osd not reached, or the URL is
 * wrong) and says so.
 */
export function apiError(status: number, body: unknown, baseUrl?: string): ApiRequestError {
  if (baseUrl !== undefined && (typeof body !== 'object' || body === null)) {
    return new ApiRequestError(
      status,
      `http_${status}`,
      `${baseUrl} answered ${status} without osd's JSON: osd is not reached there (down behind a proxy, or the URL is another server's; osd's API ends in /v1)`,
      body,
      exitCodes.unreachable,
    )
  }
  const b = (typeof body === 'object' && body) || {}
  const shaped = b as { error?: unknown; message?: unknown; statusCode?: unknown }
  const framework = typeof shaped.statusCode === 'number'
  // The framework shape carries a sentence in `message` ("Not Found"): its code is that, snake_cased.
  const code = framework
    ? String(shaped.message)
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, '_')
    : String(shaped.error ?? `http_${status}`)
  const message = framework ? String(shaped.message) : String(shaped.message ?? code)
  if (status === 401) {
    // Its words name the status: report() does not add it again (issue 51).
    return new ApiRequestError(
      status,
      code,
      'the daemon refused the token (401): check `osctl auth status`',
      body,
    )
  }
  return new ApiRequestError(status, code, message, body)
}

/**
 * The API's base URL from what the user gave (--url, OSCTL_URL, a profile; issue 51). Every route of
 * osd's API lives under /v1: a URL naming only a host and port (`http://127.0.0.1:8080`, what osd says
 * it listens on) gets /v1 added; a URL with another path that does not end in /v1 is refused, naming the
 * one meant, as is text that is not an http(s) URL. Refused in one line, exit 3 (the URL is wrong).
 */
export function apiBaseUrl(given: string, from?: string): string {
  const named = `${from ? `${from} ` : ''}"${given}"`
  let url: URL
  try {
    url = new URL(given)
  } catch {
    throw new UnreachableError(`${named} is not a URL: give osd's as http://HOST:PORT/v1`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UnreachableError(`${named} is not an http(s) URL: give osd's as http://HOST:PORT/v1`)
  const path = url.pathname.replace(/\/+$/, '')
  if (path === '' && !url.search && !url.hash) return `${url.origin}/v1`
  if (path.endsWith('/v1') && !url.search && !url.hash) return `${url.origin}${path}`
  const meant = `${url.origin}${path.includes('/v1/') ? path.slice(0, path.indexOf('/v1/') + 3) : `${path}/v1`}`
  throw new UnreachableError(
    `${named} does not end in /v1, under which osd's API lives: did you mean ${meant}?`,
  )
}

/** The transport's codes a person can act on, and what to do about each. */
const transportHints: [codes: RegExp, hint: string][] = [
  [
    /^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT)$/,
    "osd's certificate is not signed by a CA this machine trusts: give osctl that CA with NODE_EXTRA_CA_CERTS=/path/to/ca.pem",
  ],
  [/^CERT_HAS_EXPIRED$/, "osd's certificate has expired"],
  [
    /^ERR_TLS_CERT_ALTNAME_INVALID$/,
    "osd's certificate does not name this host: use the name it was made for",
  ],
  [
    /^(EPROTO|ERR_SSL_WRONG_VERSION_NUMBER)$/,
    'is it https there? osd itself serves http; https comes from a proxy in front of it',
  ],
]

/** osd out of reach: the transport's code, and what to do when it is one a person can act on. */
function unreachable(baseUrl: string, err: unknown): UnreachableError {
  const code = (err as { code?: string }).code
  const hint = code && transportHints.find(([codes]) => codes.test(code))?.[1]
  return new UnreachableError(
    `cannot reach osd at ${baseUrl}: ${code ?? (err as Error).message}${hint ? `: ${hint}` : ''}`,
  )
}

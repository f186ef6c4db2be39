import { request as httpRequest, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import type { TestApp } from './app.js'

export interface ServedAnswer<T = any> {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: T
  text: string
}

export interface SendOptions {
  /** The local address the call is made from: 127.0.0.2, 127.0.0.3 ... are all loopback on Linux. */
  from?: string
  headers?: Record<string, string>
  body?: unknown
  token?: string
}

export interface Served {
  url: string
  send<T = any>(method: string, path: string, options?: SendOptions): Promise<ServedAnswer<T>>
  close(): Promise<void>
}

/**
 * The test app served over HTTP as `osd serve` serves it (@hono/node-server), for what app.request
 * cannot show: the socket's address (the client of the rate limits) and a Host header of the caller's.
 * Calls go out over node:http from the local address asked for, each answer held to the document.
 */
export async function serveTestApp(t: TestApp): Promise<Served> {
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' }) as Server
    s.once('listening', () => resolve(s))
  })
  const port = (server.address() as AddressInfo).port
  const url = `http://127.0.0.1:${port}`
  return {
    url,
    send(method, path, options = {}) {
      const headers: Record<string, string> = { ...options.headers }
      if (options.token) headers.authorization = `Bearer ${options.token}`
      const payload = options.body === undefined ? undefined : JSON.stringify(options.body)
      if (payload !== undefined) headers['content-type'] ??= 'application/json'
      return new Promise((resolve, reject) => {
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port,
            method,
            path,
            headers,
            localAddress: options.from,
            agent: false,
          },
          (res) => {
            const chunks: Buffer[] = []
            res.on('data', (chunk: Buffer) => chunks.push(chunk))
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8')
              let body: unknown = text
              try {
                body = text ? JSON.parse(text) : undefined
              } catch {
                // not JSON
              }
              const answer = new Response(text || null, {
                status: res.statusCode!,
                headers: Object.entries(res.headers).flatMap(([k, v]) =>
                  v === undefined ? [] : (Array.isArray(v) ? v : [v]).map((x) => [k, x]),
                ) as [string, string][],
              })
              t.expectDocumented(method, path, answer)
                .then(() =>
                  resolve({
                    status: res.statusCode!,
                    headers: res.headers,
                    body: body as any,
                    text,
                  }),
                )
                .catch(reject)
            })
            res.on('error', reject)
          },
        )
        req.on('error', reject)
        req.end(payload)
      })
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

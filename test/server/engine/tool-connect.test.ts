import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseEgressAllow } from '../../../server/egress.js'
import { McpTools } from '../../../server/engine/tools/mcp.js'
import { silentLog } from '../../helpers/app.js'

// What connecting to a run's tool servers leaves behind (server/engine/tools/mcp.ts): every execution
// of a run and every chat reply connects anew, so anything left open is left once per execution.

/**
 * A tool server that starts a session and holds the event stream a client opens after it (GET), as the
 * Streamable HTTP transport lets a server, and then fails to list its tools.
 */
async function halfBrokenServer() {
  const streams = new Set<ServerResponse>()
  const server = createServer((req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/event-stream' }).flushHeaders()
      streams.add(res)
      res.on('close', () => streams.delete(res))
      return
    }
    let body = ''
    req.on('data', (chunk: Buffer) => (body += chunk.toString()))
    req.on('end', () => {
      const message = JSON.parse(body) as { id?: number; method: string; params?: any }
      if (message.id === undefined) return void res.writeHead(202).end()
      const answer =
        message.method === 'initialize'
          ? {
              result: {
                protocolVersion: message.params.protocolVersion,
                capabilities: { tools: {} },
                serverInfo: { name: 'half-broken', version: '1' },
              },
            }
          : { error: { code: -32603, message: 'the tool list is out of order' } }
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ jsonrpc: '2.0', id: message.id, ...answer }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`
  return {
    url,
    streams,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

let server: Awaited<ReturnType<typeof halfBrokenServer>>

beforeAll(async () => {
  server = await halfBrokenServer()
})
afterAll(async () => {
  await server?.close()
})

describe('a tool server that starts a session and cannot list its tools', () => {
  it('offers no tools, and no connection to it stays open after the executions', async () => {
    const limits = {
      egress: { allow: parseEgressAllow(process.env.OSD_EGRESS_ALLOW) },
      resultMaxBytes: 100_000,
    }
    const connection = {
      id: 'c',
      name: 'vcs',
      kind: 'mcp' as const,
      url: server.url,
      token: undefined,
    }
    for (let i = 0; i < 10; i++) {
      const tools = new McpTools([connection], silentLog, undefined, 5_000, limits)
      expect(await tools.connect()).toEqual([])
      await tools.close()
    }
    // The stream a client opens after its session starts comes a moment later: give it the time.
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(server.streams.size).toBe(0)
  })
})

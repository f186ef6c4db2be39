// The baseline of bench:api: a bare Hono "hello" on the same server adapter osd uses.
import { serve } from '@hono/node-server'
import { Hono } from 'hono'

const app = new Hono()
app.get('/', (c) => c.json({ hello: 'world' }))
const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
  process.stdout.write(`${info.port}\n`)
})
process.on('SIGTERM', () => server.close(() => process.exit(0)))

// npm run bench:events: how soon a waiting gate is told (issue 47, Measure). One osd process (osd serve:
// the API and the engine, whose sequencer gives events their positions and whose delivery loop posts
// them) on a throwaway embedded PostgreSQL. Reports; asserts nothing.
//   Gates are opened at BENCH_RATE (100) a second for BENCH_SECONDS (10), each by one insert into
//   gates as a run's tool call opens one; the time of its commit is the start. Measured, by gate:
//   stream:  until its gate.waiting event arrives on a connected GET /v1/events (text/event-stream);
//   post:    until a subscription's receiver (an HTTP server in this process, on 127.0.0.1) gets its
//            Standard Webhooks POST.
//   p50 and p99 of each, and how many arrived (each exactly once is the target).
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Pool } from 'undici'
import { api, benchDaemon, followStream, percentile } from './bench-lib.js'

const rate = Number(process.env.BENCH_RATE ?? 100)
const seconds = Number(process.env.BENCH_SECONDS ?? 10)

const daemon = await benchDaemon({
  OSD_LOG_LEVEL: process.env.OSD_LOG_LEVEL ?? 'warn',
  OSD_RATE_LIMIT_PER_MINUTE: 'off',
  // The receiver listens on this machine, which osd refuses to post to unless allowed (DESIGN 15).
  OSD_EGRESS_ALLOW: '127.0.0.0/8',
})
const { sql } = daemon
const call = api(daemon)
const [enterprise] = await sql<{ id: string }[]>`
  select id from enterprises where slug = ${daemon.enterpriseSlug}`

const opened = new Map<string, number>()
const onStream = new Map<string, number[]>()
const posted = new Map<string, number[]>()
const seen = (into: Map<string, number[]>, gateId: string | undefined) => {
  if (gateId) into.set(gateId, [...(into.get(gateId) ?? []), performance.now()])
}

// The subscription's receiver: 2xx at once.
const receiver = createServer((req, res) => {
  let body = ''
  req.on('data', (chunk) => (body += chunk))
  req.on('end', () => {
    res.writeHead(204).end()
    try {
      seen(posted, JSON.parse(body).data?.subject?.gateId)
    } catch {
      // not an event of ours
    }
  })
})
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
const { port } = receiver.address() as AddressInfo
await call('POST', '/event-subscriptions', {
  url: `http://127.0.0.1:${port}/hook`,
  types: ['gate.waiting'],
})

// The stream reader.
const client = new Pool(new URL(daemon.url).origin, { connections: 2 })
const stopReading = await followStream(client, daemon, '/events?types=gate.waiting', (_, data) =>
  seen(onStream, data.subject?.gateId),
)

// Open the gates at the rate, each on time whatever the one before took.
const total = rate * seconds
const started = performance.now()
const inserts: Promise<void>[] = []
for (let i = 0; i < total; i++) {
  const due = started + (i * 1000) / rate
  const wait = due - performance.now()
  if (wait > 0) await new Promise((r) => setTimeout(r, wait))
  inserts.push(
    sql<{ id: string }[]>`
      insert into gates (enterprise_id, kind, tool, summary)
      values (${enterprise!.id}, 'question', 'os.ask_ceo', ${`Gate ${i}?`}) returning id`.then(
      ([gate]) => void opened.set(gate!.id, performance.now()),
    ),
  )
}
await Promise.all(inserts)
const deadline = Date.now() + 60_000
while ((onStream.size < total || posted.size < total) && Date.now() < deadline)
  await new Promise((r) => setTimeout(r, 100))

function report(what: string, arrivals: Map<string, number[]>) {
  const latencies: number[] = []
  let repeated = 0
  for (const [gateId, at] of opened) {
    const times = arrivals.get(gateId)
    if (!times) continue
    latencies.push(times[0]! - at)
    repeated += times.length - 1
  }
  console.log(
    `${what.padEnd(8)} p50 ${percentile(latencies, 50).toFixed(0)} ms  p99 ${percentile(latencies, 99).toFixed(0)} ms  arrived ${latencies.length}/${total}  repeated ${repeated}`,
  )
}
console.log(`${total} gates at ${rate}/s`)
report('stream', onStream)
report('post', posted)

stopReading()
await client.close().catch(() => undefined)
receiver.close()
await daemon.close()

// npm run bench:api: requests/s and latency of osd's routes beside a bare Hono "hello" measured in the
// same run, which is the baseline to compare against (these machines are shared and noisy). Reports;
// asserts nothing. Target: the authenticated route at >= 40% of bare Hono's requests/s. The osd routes
// are measured twice, on a second process with /metrics on (OSD_METRICS_PORT, scraped every second
// meanwhile): issue 33's target is at most 5% fewer requests/s with metrics on. The first process
// runs with rate limits off, a third with them on at a rate the load never reaches, so that the
// limiter's cost is what differs: issue 44's target is >= 95% of the requests/s with them off.
import { join } from 'node:path'
import autocannon from 'autocannon'
import { execa } from 'execa'
import { projectRoot } from '../shared/paths.js'
import { freePort } from '../server/db/embedded.js'
import { benchDaemon, median, scrapeEvery } from './bench-lib.js'

const seconds = Number(process.env.BENCH_SECONDS ?? 8)
const rounds = Number(process.env.BENCH_ROUNDS ?? 3)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 32)

// Rate limits off here (a bench from one address would be refused); on, out of reach, on `limited`.
const daemon = await benchDaemon({
  OSD_RATE_LIMIT_PER_MINUTE: 'off',
  OSD_RATE_LIMIT_IP_PER_MINUTE: 'off',
})
const limitedPort = await freePort()
const limited = await daemon.start(['--port', String(limitedPort)], {
  OSD_RATE_LIMIT_PER_MINUTE: '1000000000',
  OSD_RATE_LIMIT_IP_PER_MINUTE: '1000000000',
})
const limitedUrl = `http://127.0.0.1:${limitedPort}/v1`
const meteredPort = await freePort()
const metricsPort = await freePort()
const metered = await daemon.start(['--port', String(meteredPort)], {
  OSD_METRICS_PORT: String(metricsPort),
})
const meteredUrl = `http://127.0.0.1:${meteredPort}/v1`
const stopScraping = scrapeEvery(`http://127.0.0.1:${metricsPort}/metrics`)
const bare = execa('node', [join(projectRoot, 'scripts', 'bare-hono.mjs')], {
  buffer: false,
  reject: false,
})
const barePort = await new Promise<string>((resolve) =>
  bare.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())),
)

const targets: { name: string; url: string; headers: Record<string, string> }[] = [
  { name: 'bare Hono GET / (baseline)', url: `http://127.0.0.1:${barePort}/`, headers: {} },
  { name: 'osd GET /v1/health', url: `${daemon.url}/health`, headers: {} },
  {
    name: 'osd GET /v1/enterprise/concurrency (token)',
    url: `${daemon.url}/enterprise/concurrency`,
    headers: { authorization: `Bearer ${daemon.token}` },
  },
  {
    name: 'osd GET /v1/enterprise/concurrency, limits on',
    url: `${limitedUrl}/enterprise/concurrency`,
    headers: { authorization: `Bearer ${daemon.token}` },
  },
  { name: 'osd GET /v1/health, metrics on', url: `${meteredUrl}/health`, headers: {} },
  {
    name: 'osd GET /v1/enterprise/concurrency, metrics on',
    url: `${meteredUrl}/enterprise/concurrency`,
    headers: { authorization: `Bearer ${daemon.token}` },
  },
]

const results = new Map<string, { rps: number[]; p50: number[]; p99: number[]; errors: number }>()
for (const target of targets) {
  results.set(target.name, { rps: [], p50: [], p99: [], errors: 0 })
  await autocannon({ url: target.url, headers: target.headers, connections, duration: 2 }) // warm up
}
for (let round = 1; round <= rounds; round++) {
  for (const target of targets) {
    const r = await autocannon({
      url: target.url,
      headers: target.headers,
      connections,
      duration: seconds,
    })
    const row = results.get(target.name)!
    row.rps.push(r.requests.average)
    row.p50.push(r.latency.p50)
    row.p99.push(r.latency.p99)
    row.errors += r.errors + r.non2xx + r.timeouts
    process.stderr.write(
      `round ${round}: ${target.name}: ${Math.round(r.requests.average)} req/s\n`,
    )
  }
}

bare.kill('SIGTERM')
stopScraping()
await metered.stop()
await limited.stop()
await daemon.close()

const baseline = median(results.get(targets[0]!.name)!.rps)
console.log(`\nbench:api  ${rounds} rounds x ${seconds}s, ${connections} connections, medians`)
console.log(
  'target'.padEnd(46),
  'req/s'.padStart(8),
  'p50 ms'.padStart(8),
  'p99 ms'.padStart(8),
  'vs bare'.padStart(8),
  'errors'.padStart(7),
)
for (const [name, row] of results) {
  const rps = median(row.rps)
  console.log(
    name.padEnd(46),
    String(Math.round(rps)).padStart(8),
    median(row.p50).toFixed(1).padStart(8),
    median(row.p99).toFixed(1).padStart(8),
    `${Math.round((100 * rps) / baseline)}%`.padStart(8),
    String(row.errors).padStart(7),
  )
}

import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { projectRoot } from '../../../shared/paths.js'
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js'
import { startOtlpReceiver, type OtlpReceiver } from '../../helpers/otlp.js'
import { startOsd } from '../../helpers/processes.js'
import { eventually } from '../../helpers/wait.js'

// What bin/osd and bin/osctl run is dist/bundle (scripts/bundle.mjs), and most of what it loads late
// runs in no other test of a process: the tracing SDK and its exporters (OpenTelemetry's ES module
// builds), the metrics (prom-client, left out of the bundle), mail (nodemailer), the model SDKs and
// the MCP client. The in-process tests run the TypeScript.

let db: TestDatabase
let receiver: OtlpReceiver
beforeAll(async () => {
  db = await createTestDatabase()
  receiver = await startOtlpReceiver()
})
afterAll(async () => {
  await receiver.close()
})

it('loads every package the code import()s from its chunk', async () => {
  const { outputs } = JSON.parse(
    await readFile(join(projectRoot, 'dist/bundle/meta.json'), 'utf8'),
  ) as { outputs: Record<string, { entryPoint?: string }> }
  const chunks = Object.entries(outputs)
    .filter(([, { entryPoint }]) => entryPoint?.includes('node_modules/'))
    // ink's devtools import react-devtools-core, which is not installed: ink loads them only with
    // DEV=true, and fails there from node_modules alike.
    .filter(([, { entryPoint }]) => !entryPoint!.includes('/ink/build/devtools'))
    .map(([chunk, { entryPoint }]) => ({
      url: pathToFileURL(join(projectRoot, chunk)).href,
      entryPoint: entryPoint!.slice(entryPoint!.lastIndexOf('node_modules/')),
    }))
  expect(chunks.map((c) => c.entryPoint)).toEqual(
    expect.arrayContaining([
      'node_modules/nodemailer/dist/esm/nodemailer.js',
      'node_modules/openai/index.mjs',
      'node_modules/@anthropic-ai/sdk/index.mjs',
      'node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js',
      expect.stringMatching(/^node_modules\/@opentelemetry\/exporter-trace-otlp-proto\//),
    ]),
  )
  const script = `
    const names = {}
    for (const url of ${JSON.stringify(chunks.map((c) => c.url))})
      names[url] = Object.keys(await import(url))
    console.log(JSON.stringify(names))`
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--input-type=module', '-e', script],
    { cwd: projectRoot },
  )
  const names = JSON.parse(stdout) as Record<string, string[]>
  for (const { url, entryPoint } of chunks)
    expect(names[url]?.length, `${entryPoint} answers nothing`).toBeGreaterThan(0)
  expect(names[chunks.find((c) => c.entryPoint.includes('nodemailer'))!.url]).toContain(
    'createTransport',
  )
})

it("a traced osd with metrics on sends its requests' spans to the collector and answers a scrape", async () => {
  const osd = await startOsd({
    DATABASE_URL: db.url,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OSD_METRICS_PORT: '0',
  })
  try {
    const health = await fetch(`${osd.url}/health`)
    expect(health.status).toBe(200)
    const started = osd.logs.find((l) => l.msg === 'osd started')!
    const scrape = await fetch(String(started.metricsUrl))
    expect(scrape.status).toBe(200)
    expect(await scrape.text()).toMatch(
      /^osd_http_request_duration_seconds_count\{.*route="\/v1\/health"/m,
    )
  } finally {
    // The stop sends what the exporter holds.
    expect(await osd.stop()).toBe(0)
  }
  await eventually(() => receiver.spans.some((s) => /^GET \S*\/health$/.test(s.name)), 5000)
  expect(receiver.requests[0]!.contentType).toBe('application/x-protobuf')
}, 60_000)

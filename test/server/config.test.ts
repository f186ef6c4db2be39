import { readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  defaultEngineConcurrency,
  defaultPasswordLog2N,
  defaultLeaseSeconds,
  loadConfig,
} from '../../server/config.js'

describe('OSD_PROMPT_CACHE (issue 29)', () => {
  it('is on unless set to off', () => {
    const promptCache = (value?: string) =>
      loadConfig({}, value === undefined ? {} : { OSD_PROMPT_CACHE: value }).promptCache
    expect(promptCache()).toBe(true)
    expect(promptCache('')).toBe(true)
    expect(promptCache('on')).toBe(true)
    expect(promptCache('off')).toBe(false)
    expect(promptCache(' OFF ')).toBe(false)
  })
})

describe('timeouts of the world osd calls (issue 34)', () => {
  it('reads OSD_MODEL_TIMEOUT_SECONDS, OSD_MODEL_IDLE_SECONDS and OSD_TOOL_TIMEOUT_SECONDS, else their defaults', () => {
    expect(loadConfig({}, {})).toMatchObject({
      modelTimeoutSeconds: 120,
      modelIdleSeconds: 60,
      toolTimeoutSeconds: 120,
    })
    const set = loadConfig(
      {},
      {
        OSD_MODEL_TIMEOUT_SECONDS: '30',
        OSD_MODEL_IDLE_SECONDS: '5.5',
        OSD_TOOL_TIMEOUT_SECONDS: '9',
      },
    )
    expect(set).toMatchObject({
      modelTimeoutSeconds: 30,
      modelIdleSeconds: 5.5,
      toolTimeoutSeconds: 9,
    })
    // Set, but not a positive number: osd stops at start, naming it, as for every such variable.
    expect(() => loadConfig({}, { OSD_MODEL_TIMEOUT_SECONDS: 'soon' })).toThrow(
      'OSD_MODEL_TIMEOUT_SECONDS must be a positive number, at most 2147483 (24 days); got "soon"',
    )
    expect(() => loadConfig({}, { OSD_MODEL_IDLE_SECONDS: '-1' })).toThrow(/OSD_MODEL_IDLE_SECONDS/)
    expect(() => loadConfig({}, { OSD_TOOL_TIMEOUT_SECONDS: '0' })).toThrow(
      /OSD_TOOL_TIMEOUT_SECONDS/,
    )
    expect(loadConfig({}, { OSD_MODEL_TIMEOUT_SECONDS: ' ' }).modelTimeoutSeconds).toBe(120)
  })
})

describe('the metrics listener (issue 33)', () => {
  it('is off unless OSD_METRICS_PORT or --metrics-port names a port; 0 picks one; the flag wins', () => {
    expect(loadConfig({}, {})).toMatchObject({ metricsPort: undefined, metricsHost: '127.0.0.1' })
    expect(loadConfig({}, { OSD_METRICS_PORT: '' }).metricsPort).toBeUndefined()
    expect(loadConfig({}, { OSD_METRICS_PORT: '9464' }).metricsPort).toBe(9464)
    expect(loadConfig({ metricsPort: '0' }, { OSD_METRICS_PORT: '9464' }).metricsPort).toBe(0)
    expect(loadConfig({}, { OSD_METRICS_HOST: '0.0.0.0' }).metricsHost).toBe('0.0.0.0')
    expect(() => loadConfig({}, { OSD_METRICS_PORT: 'ninety' })).toThrow(/port must be/)
  })
})

describe('the event feed (issue 47)', () => {
  it('keeps OSD_FEED_KEEP_HOURS, 168 (7 days) unless set; stops at start on one not positive', () => {
    expect(loadConfig({}, {}).feedKeepHours).toBe(168)
    expect(loadConfig({}, { OSD_FEED_KEEP_HOURS: '24' }).feedKeepHours).toBe(24)
    expect(loadConfig({}, { OSD_FEED_KEEP_HOURS: '0.5' }).feedKeepHours).toBe(0.5)
    expect(() => loadConfig({}, { OSD_FEED_KEEP_HOURS: 'a day' })).toThrow(
      'OSD_FEED_KEEP_HOURS must be a positive number; got "a day"',
    )
  })

  it('stops at start on an improve interval, a lease or an execution bound that is not a number of its kind', () => {
    expect(loadConfig({}, {})).toMatchObject({
      improveIntervalMinutes: 60,
      leaseSeconds: 30,
      maxExecutionRuns: 500,
    })
    expect(loadConfig({}, { OSD_IMPROVE_INTERVAL_MINUTES: 'off' }).improveIntervalMinutes).toBe(
      undefined,
    )
    expect(loadConfig({}, { OSD_IMPROVE_INTERVAL_MINUTES: '0' }).improveIntervalMinutes).toBe(0)
    expect(() => loadConfig({}, { OSD_IMPROVE_INTERVAL_MINUTES: 'hourly' })).toThrow(
      'OSD_IMPROVE_INTERVAL_MINUTES must be a number of minutes (0 or more), or off; got "hourly"',
    )
    expect(() => loadConfig({}, { OSD_LEASE_SECONDS: 'long' })).toThrow(/OSD_LEASE_SECONDS/)
    expect(loadConfig({}, { OSD_MAX_EXECUTION_RUNS: '50' }).maxExecutionRuns).toBe(50)
    // Not a number, it had made no bound at all: every comparison with NaN is false.
    expect(() => loadConfig({}, { OSD_MAX_EXECUTION_RUNS: 'many' })).toThrow(
      'OSD_MAX_EXECUTION_RUNS must be a whole number of 1 or more; got "many"',
    )
  })

  it('stops at start on a session or stream limit that is not a number of its kind', () => {
    expect(loadConfig({}, {}).session).toEqual({ idleMinutes: 720, maxHours: 168 })
    expect(loadConfig({}, { OSD_SESSION_MAX_HOURS: '8' }).session.maxHours).toBe(8)
    expect(() => loadConfig({}, { OSD_SESSION_IDLE_MINUTES: '30m' })).toThrow(
      /OSD_SESSION_IDLE_MINUTES/,
    )
    expect(() => loadConfig({}, { OSD_SESSION_MAX_HOURS: '-8' })).toThrow(/OSD_SESSION_MAX_HOURS/)
    expect(loadConfig({}, { OSD_MAX_STREAMS_PER_TOKEN: '5' }).maxStreamsPerToken).toBe(5)
    expect(() => loadConfig({}, { OSD_MAX_STREAMS_PER_TOKEN: '0.5' })).toThrow(
      'OSD_MAX_STREAMS_PER_TOKEN must be a whole number of 1 or more; got "0.5"',
    )
  })
})

describe('what a tool server may make osd read and where osd connects (issue 44)', () => {
  it('reads OSD_TOOL_RESULT_MAX_BYTES, 100000 unless set; stops at start on one not whole', () => {
    expect(loadConfig({}, {}).toolResultMaxBytes).toBe(100_000)
    expect(loadConfig({}, { OSD_TOOL_RESULT_MAX_BYTES: '250000' }).toolResultMaxBytes).toBe(250_000)
    expect(() => loadConfig({}, { OSD_TOOL_RESULT_MAX_BYTES: 'lots' })).toThrow(
      /OSD_TOOL_RESULT_MAX_BYTES/,
    )
    expect(() => loadConfig({}, { OSD_TOOL_RESULT_MAX_BYTES: '0' })).toThrow(
      'OSD_TOOL_RESULT_MAX_BYTES must be a whole number of 1 or more; got "0"',
    )
  })

  it('reads OSD_EGRESS_ALLOW once, and stops at a wrong entry', () => {
    expect(loadConfig({}, {}).egress.allow).toEqual({ networks: [], names: [], suffixes: [] })
    const allow = loadConfig({}, { OSD_EGRESS_ALLOW: '127.0.0.0/8,::1,tools.corp.example' }).egress
      .allow
    expect(allow.networks).toHaveLength(2)
    expect(allow.names).toEqual(['tools.corp.example'])
    expect(() => loadConfig({}, { OSD_EGRESS_ALLOW: '300.0.0.0/8' })).toThrow(/OSD_EGRESS_ALLOW/)
  })
})

describe('how much work an engine takes (issue 43)', () => {
  it('reads OSD_ENGINE_CONCURRENCY, the default unless set, and stops at anything but a whole number of 1 or more', () => {
    expect(loadConfig({}, {}).engineConcurrency).toBe(defaultEngineConcurrency)
    expect(loadConfig({}, { OSD_ENGINE_CONCURRENCY: ' ' }).engineConcurrency).toBe(
      defaultEngineConcurrency,
    )
    expect(loadConfig({}, { OSD_ENGINE_CONCURRENCY: '4' }).engineConcurrency).toBe(4)
    for (const wrong of ['0', '-2', '2.5', 'many'])
      expect(() => loadConfig({}, { OSD_ENGINE_CONCURRENCY: wrong })).toThrow(
        /OSD_ENGINE_CONCURRENCY must be a whole number of 1 or more/,
      )
  })

  it('runs the retention pass every OSD_RETENTION_INTERVAL_SECONDS, 60 unless set, and stops at anything but a whole number of 1 or more (issue 46)', () => {
    expect(loadConfig({}, {}).retention.intervalSeconds).toBe(60)
    expect(loadConfig({}, { OSD_RETENTION_INTERVAL_SECONDS: ' ' }).retention.intervalSeconds).toBe(
      60,
    )
    expect(loadConfig({}, { OSD_RETENTION_INTERVAL_SECONDS: '5' }).retention.intervalSeconds).toBe(
      5,
    )
    for (const wrong of ['0', '-5', 'abc', '0.5'])
      expect(() => loadConfig({}, { OSD_RETENTION_INTERVAL_SECONDS: wrong })).toThrow(
        `OSD_RETENTION_INTERVAL_SECONDS must be a whole number of seconds from 1 to 2147483 (24 days); got "${wrong}"`,
      )
  })

  it('leases last OSD_LEASE_SECONDS, defaultLeaseSeconds unless set', () => {
    expect(loadConfig({}, {}).leaseSeconds).toBe(defaultLeaseSeconds)
    expect(loadConfig({}, { OSD_LEASE_SECONDS: '3' }).leaseSeconds).toBe(3)
  })

  it('falls back to defaultLeaseSeconds wherever a lease is made, never a 30 of its own', () => {
    // The 30 s default was once written in eight places, and a loop added later (event deliveries)
    // wrote it a ninth time: changing the default would have left that loop on the old one.
    const server = resolve(import.meta.dirname, '..', '..', 'server')
    const files = (readdirSync(server, { recursive: true }) as string[]).filter((f) =>
      f.endsWith('.ts'),
    )
    const own = files.flatMap((file) =>
      readFileSync(join(server, file), 'utf8')
        .split('\n')
        .map((line, i) => ({ line, at: `${file}:${i + 1}` }))
        .filter(({ line }) => /lease\w*\s*(\?\?|=)\s*30\b/i.test(line))
        .filter(({ line }) => !line.startsWith('export const defaultLeaseSeconds = '))
        .map(({ at }) => at),
    )
    expect(own).toEqual([])
  })
})

describe('durations osd waits out with a timer', () => {
  it('stops at start on one longer than a timer holds (24 days), which Node would fire after 1 ms', () => {
    // 30 days: every model call would have timed out at once, the retention pass run without rest.
    for (const name of [
      'OSD_MODEL_TIMEOUT_SECONDS',
      'OSD_MODEL_IDLE_SECONDS',
      'OSD_TOOL_TIMEOUT_SECONDS',
      'OSD_LEASE_SECONDS',
    ])
      expect(() => loadConfig({}, { [name]: '2592000' }), name).toThrow(
        `${name} must be a positive number, at most 2147483 (24 days); got "2592000"`,
      )
    expect(() => loadConfig({}, { OSD_RETENTION_INTERVAL_SECONDS: '2592000' })).toThrow(
      /^OSD_RETENTION_INTERVAL_SECONDS must be a whole number of seconds from 1 to 2147483/,
    )
    expect(
      loadConfig(
        {},
        { OSD_MODEL_TIMEOUT_SECONDS: '2147483', OSD_RETENTION_INTERVAL_SECONDS: '2147483' },
      ),
    ).toMatchObject({ modelTimeoutSeconds: 2147483, retention: { intervalSeconds: 2147483 } })
  })
})

describe('mail to people (issue 47)', () => {
  const smtp = 'smtp://osd:s3cret@mail.example.com:587'

  it('takes OSD_MAIL_FROM as one address, alone or with a name', () => {
    for (const from of [
      'osd@example.com',
      'osd <osd@example.com>',
      '"Ops, osd" <osd@mail.example.com>',
    ])
      expect(loadConfig({}, { OSD_SMTP_URL: smtp, OSD_MAIL_FROM: from }).mailFrom).toBe(from)
  })

  it('stops at start on an OSD_MAIL_FROM that is no one address, or an OSD_SMTP_URL without a host', () => {
    // The mail library made an empty sender of them and osd started: mail went out bounced, or not at all.
    for (const from of ['osd', 'not an address', 'osd@', 'osd <osd@example.com', 'a@b.c, d@e.f'])
      expect(() => loadConfig({}, { OSD_SMTP_URL: smtp, OSD_MAIL_FROM: from }), from).toThrow(
        `OSD_MAIL_FROM must be one address, alone or with a name (osd@example.com, osd <osd@example.com>); got "${from}"`,
      )
    // Without a host, nodemailer tried this machine's port 587.
    for (const url of ['smtp://', 'smtps://'])
      expect(() => loadConfig({}, { OSD_SMTP_URL: url, OSD_MAIL_FROM: 'osd@example.com' })).toThrow(
        'OSD_SMTP_URL names no host (smtp://user:pass@host:587 or smtps://...)',
      )
  })
})

describe('the log level', () => {
  it('reads OSD_LOG_LEVEL, info unless set, in any case; stops at start, naming it, on a level pino does not know', () => {
    expect(loadConfig({}, {}).logLevel).toBe('info')
    expect(loadConfig({}, { OSD_LOG_LEVEL: ' WARN ' }).logLevel).toBe('warn')
    expect(loadConfig({}, { OSD_LOG_LEVEL: 'silent' }).logLevel).toBe('silent')
    // It was pino's stack: "default level:verbose must be included in custom levels".
    expect(() => loadConfig({}, { OSD_LOG_LEVEL: 'verbose' })).toThrow(
      'OSD_LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent; got "verbose"',
    )
  })
})

describe('what a password hash costs (issue 40)', () => {
  it('reads OSD_PASSWORD_COST, 17 unless set, and stops at anything but a whole number from 10 to 20', () => {
    expect(loadConfig({}, {}).passwordLog2N).toBe(17)
    expect(defaultPasswordLog2N).toBe(17)
    expect(loadConfig({}, { OSD_PASSWORD_COST: '' }).passwordLog2N).toBe(17)
    expect(loadConfig({}, { OSD_PASSWORD_COST: '10' }).passwordLog2N).toBe(10)
    expect(loadConfig({}, { OSD_PASSWORD_COST: ' 20 ' }).passwordLog2N).toBe(20)
    for (const wrong of ['9', '21', '15.5', 'cheap'])
      expect(() => loadConfig({}, { OSD_PASSWORD_COST: wrong })).toThrow(
        /OSD_PASSWORD_COST must be a whole number from 10 to 20/,
      )
  })
})

describe('the OTLP endpoint (issue 49)', () => {
  it('turns tracing on with an http or https URL, the generic one or the traces one', () => {
    for (const env of [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' },
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'https://api.example.com/otlp/' },
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' },
    ])
      expect(loadConfig({}, env).traces.enabled, JSON.stringify(env)).toBe(true)
    expect(loadConfig({}, { OTEL_EXPORTER_OTLP_ENDPOINT: ' ' }).traces.enabled).toBe(false)
  })

  it('is left off, whatever the endpoint, by OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none', () => {
    // An endpoint set for the whole host (a pod's, a shell's), and osd told to send nothing.
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }
    for (const off of [
      { OTEL_SDK_DISABLED: 'true' },
      { OTEL_SDK_DISABLED: 'TRUE' },
      { OTEL_TRACES_EXPORTER: 'none' },
      { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
    ])
      expect(loadConfig({}, { ...endpoint, ...off }).traces.enabled, JSON.stringify(off)).toBe(
        false,
      )
    for (const on of [{ OTEL_SDK_DISABLED: 'false' }, { OTEL_TRACES_EXPORTER: 'otlp' }])
      expect(loadConfig({}, { ...endpoint, ...on }).traces.enabled, JSON.stringify(on)).toBe(true)
  })

  it('stops osd at start on a sampler, a ratio or an exporter the SDK would replace by keeping every trace', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }
    const traced = (more: Record<string, string>) => loadConfig({}, { ...endpoint, ...more }).traces
    for (const sampler of ['always_off', 'parentbased_traceidratio'])
      expect(traced({ OTEL_TRACES_SAMPLER: sampler, OTEL_TRACES_SAMPLER_ARG: '0.1' }).enabled).toBe(
        true,
      )
    expect(traced({ OTEL_TRACES_EXPORTER: 'otlp' }).enabled).toBe(true)
    // The SDK warned and sampled every trace; a zipkin exporter was OTLP all the same.
    expect(() => traced({ OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(
      /^OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, .*; got "sometimes"$/,
    )
    for (const ratio of ['half', '10', '-0.1'])
      expect(() =>
        traced({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: ratio }),
      ).toThrow(
        `OTEL_TRACES_SAMPLER_ARG must be the share of traces kept, from 0 to 1 (0.1: one in ten); got "${ratio}"`,
      )
    expect(() => traced({ OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(
      /^OTEL_TRACES_EXPORTER must be otlp \(or none for no traces\)/,
    )
    // Traces off (no endpoint), osd reads none of them.
    expect(loadConfig({}, { OTEL_TRACES_SAMPLER: 'sometimes' }).traces.enabled).toBe(false)
  })

  it('stops osd at start on one that is not an http or https URL, never printing what it holds', () => {
    // The SDK would drop it without a word and send the spans to http://localhost:4318, wherever
    // that is: prompts and tool results included, with content capture on.
    for (const [name, value] of [
      ['OTEL_EXPORTER_OTLP_ENDPOINT', '127.0.0.1:4318'],
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318'],
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'http://user:s3cret@[::1'],
      ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'ftp://user:s3cret@collector/v1/traces'],
    ] as const) {
      let message = ''
      try {
        loadConfig({}, { [name]: value })
      } catch (err) {
        message = (err as Error).message
      }
      expect(message, value).toMatch(new RegExp(`^${name} is not an http or https URL`))
      expect(message).not.toContain('s3cret')
    }
  })
})

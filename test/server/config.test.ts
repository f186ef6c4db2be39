import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../server/config.js'

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
    // Not a positive number: the default, as for the other durations.
    const bad = loadConfig({}, { OSD_MODEL_TIMEOUT_SECONDS: 'soon', OSD_MODEL_IDLE_SECONDS: '-1' })
    expect(bad).toMatchObject({ modelTimeoutSeconds: 120, modelIdleSeconds: 60 })
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

describe('what a tool server may make osd read and where osd connects (issue 44)', () => {
  it('reads OSD_TOOL_RESULT_MAX_BYTES, 100000 unless a positive number', () => {
    expect(loadConfig({}, {}).toolResultMaxBytes).toBe(100_000)
    expect(loadConfig({}, { OSD_TOOL_RESULT_MAX_BYTES: '250000' }).toolResultMaxBytes).toBe(250_000)
    expect(loadConfig({}, { OSD_TOOL_RESULT_MAX_BYTES: 'lots' }).toolResultMaxBytes).toBe(100_000)
    expect(loadConfig({}, { OSD_TOOL_RESULT_MAX_BYTES: '0' }).toolResultMaxBytes).toBe(100_000)
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

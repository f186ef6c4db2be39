import { beforeAll, describe, expect, it } from 'vitest'
import { RetentionSettings } from '../../../shared/schemas/retention.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'

// GET and PATCH /v1/enterprise/retention (issue 46): an enterprise's retention windows, as ISO 8601
// durations read strictly, and its archive switch.

let t: TestApp
beforeAll(async () => {
  t = await createTestApp()
})

describe('GET /v1/enterprise/retention', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/enterprise/retention' })

  it('answers the defaults until changed: 90 days, 180 days, 30 days, archive on', async () => {
    const fresh = await t.createEnterprise('Fresh Retention')
    const res = await t.call('GET', '/v1/enterprise/retention', { token: fresh.token })
    expect(res.status).toBe(200)
    expect(RetentionSettings.parse(res.body)).toEqual({
      finishedRuns: 'P90D',
      closedChats: 'P180D',
      webhookDeliveries: 'P30D',
      archive: true,
    })
  })
})

describe('PATCH /v1/enterprise/retention', () => {
  commonRouteChecks(() => t, {
    method: 'PATCH',
    path: () => '/v1/enterprise/retention',
    body: () => ({ archive: true }),
  })

  it('changes the fields given and keeps the others; null keeps for ever', async () => {
    const e = await t.createEnterprise('Patch Retention')
    const as = { token: e.token }
    const first = await t.call('PATCH', '/v1/enterprise/retention', {
      ...as,
      body: { finishedRuns: 'PT1M', closedChats: null },
    })
    expect(first.status).toBe(200)
    expect(first.body).toEqual({
      finishedRuns: 'PT1M',
      closedChats: null,
      webhookDeliveries: 'P30D',
      archive: true,
    })
    const second = await t.call('PATCH', '/v1/enterprise/retention', {
      ...as,
      body: { archive: false, webhookDeliveries: 'P1Y2M3W4DT5H6M7S' },
    })
    expect(second.body).toEqual({
      finishedRuns: 'PT1M',
      closedChats: null,
      webhookDeliveries: 'P1Y2M3W4DT5H6M7S',
      archive: false,
    })
    expect((await t.call('GET', '/v1/enterprise/retention', as)).body).toEqual(second.body)
    // Another enterprise's windows are its own.
    expect((await t.call('GET', '/v1/enterprise/retention')).body.finishedRuns).toBe('P90D')
  })

  it.each([
    ['P', 'no part'],
    ['PT', 'T with nothing after it'],
    ['p90d', 'lower case'],
    ['P1.5D', 'a fraction'],
    ['90 days', 'not ISO 8601'],
    ['PT0S', 'zero'],
    ['P1000Y', 'over a hundred years'],
    ['P1DT', 'a T at the end'],
    ['-P1D', 'negative'],
  ])('refuses %s (%s) with 400 invalid_request naming the field', async (window) => {
    const res = await t.call('PATCH', '/v1/enterprise/retention', {
      body: { finishedRuns: window },
    })
    expect(res.status).toBe(400)
    expect(res.body.error).toBe('invalid_request')
    expect(res.body.issues).toEqual([
      expect.objectContaining({ field: 'finishedRuns', message: expect.any(String) }),
    ])
  })

  it('refuses a field it does not know and a window of the wrong type', async () => {
    const unknown = await t.call('PATCH', '/v1/enterprise/retention', {
      body: { finishedRun: 'P1D' },
    })
    expect(unknown.status).toBe(400)
    expect(unknown.body.error).toBe('invalid_request')
    const number = await t.call('PATCH', '/v1/enterprise/retention', {
      body: { closedChats: 30 },
    })
    expect(number.status).toBe(400)
    const archive = await t.call('PATCH', '/v1/enterprise/retention', { body: { archive: 'yes' } })
    expect(archive.status).toBe(400)
    // Nothing was changed by the refusals.
    expect((await t.call('GET', '/v1/enterprise/retention')).body).toMatchObject({
      finishedRuns: 'P90D',
      closedChats: 'P180D',
      archive: true,
    })
  })
})

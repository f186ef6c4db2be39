import { beforeAll, describe, expect, it } from 'vitest'
import {
  verifyWebhookSecret,
  webhookSecretHolder,
} from '../../../server/domain/enterprises/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'
import { eventually } from '../../helpers/wait.js'

let t: TestApp
beforeAll(async () => {
  t = await createTestApp()
})

// Smallest valid images of each accepted type.
const png = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
)
const gif = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64')
const dataUrl = (type: string, bytes: Buffer) => `data:${type};base64,${bytes.toString('base64')}`

describe('webhook secret (spec: Authentication 8)', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/enterprise/webhook-secret' })
  commonRouteChecks(() => t, { method: 'POST', path: () => '/v1/enterprise/webhook-secret/rotate' })

  it('shows the last characters and since when, never the secret', async () => {
    const fresh = await t.createEnterprise('Never Rotated')
    const res = await t.call('GET', '/v1/enterprise/webhook-secret', { token: fresh.token })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['lastChars', 'rotated', 'since'])
    expect(res.body.lastChars).toHaveLength(4)
    expect(res.body.rotated).toBe(false)
    expect(res.body.since).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  })

  it('rotates: the new secret is shown once and works; the old one stops at once', async () => {
    const first = await t.call('POST', '/v1/enterprise/webhook-secret/rotate')
    expect(first.status).toBe(200)
    expect(first.body.secret).toMatch(/^whsec_/)
    expect(first.body.lastChars).toBe(first.body.secret.slice(-4))
    expect(
      verifyWebhookSecret(await webhookSecretHolder(t.sql, t.acme.slug), first.body.secret),
    ).toMatchObject({
      id: t.acme.id,
    })

    const second = await t.call('POST', '/v1/enterprise/webhook-secret/rotate')
    expect(second.body.secret).not.toBe(first.body.secret)
    expect(
      verifyWebhookSecret(await webhookSecretHolder(t.sql, t.acme.slug), first.body.secret),
    ).toBeUndefined()
    expect(
      verifyWebhookSecret(await webhookSecretHolder(t.sql, t.acme.slug), second.body.secret),
    ).toBeDefined()

    const info = await t.call('GET', '/v1/enterprise/webhook-secret')
    expect(info.body).toMatchObject({ lastChars: second.body.lastChars, rotated: true })
    expect(JSON.stringify(info.body)).not.toContain(second.body.secret)
    const [row] = await t.sql`select webhook_secret_hash from enterprises where id = ${t.acme.id}`
    expect(Buffer.from(row!.webhookSecretHash).toString()).not.toContain(second.body.secret)
  })

  it('treats a wrong secret and an unknown enterprise alike', async () => {
    const { body } = await t.call('POST', '/v1/enterprise/webhook-secret/rotate')
    expect(
      verifyWebhookSecret(await webhookSecretHolder(t.sql, t.acme.slug), 'whsec_wrong'),
    ).toBeUndefined()
    expect(
      verifyWebhookSecret(await webhookSecretHolder(t.sql, 'no-such-enterprise'), body.secret),
    ).toBeUndefined()
    expect(
      verifyWebhookSecret(await webhookSecretHolder(t.sql, t.other.slug), body.secret),
    ).toBeUndefined()
    expect(
      verifyWebhookSecret(await webhookSecretHolder(t.sql, t.acme.slug), undefined),
    ).toBeUndefined()
  })
})

describe('avatar', () => {
  commonRouteChecks(() => t, {
    method: 'PUT',
    path: () => '/v1/enterprise/avatar',
    body: () => ({ dataUrl: dataUrl('image/png', png) }),
  })
  commonRouteChecks(() => t, { method: 'DELETE', path: () => '/v1/enterprise/avatar' })

  it('stores a png or gif data URL and removes it', async () => {
    const res = await t.call('PUT', '/v1/enterprise/avatar', {
      body: { dataUrl: dataUrl('image/png', png) },
    })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ contentType: 'image/png', bytes: png.length })
    const again = await t.call('PUT', '/v1/enterprise/avatar', {
      body: { dataUrl: dataUrl('image/gif', gif) },
    })
    expect(again.body.contentType).toBe('image/gif')
    const [row] =
      await t.sql`select content_type, data from enterprise_avatars where enterprise_id = ${t.acme.id}`
    expect(row!.contentType).toBe('image/gif')
    expect(Buffer.from(row!.data).equals(gif)).toBe(true)

    const removed = await t.call('DELETE', '/v1/enterprise/avatar')
    expect(removed.status).toBe(204)
    expect(removed.text).toBe('')
    expect(
      await t.sql`select 1 from enterprise_avatars where enterprise_id = ${t.acme.id}`,
    ).toHaveLength(0)
    expect((await t.call('DELETE', '/v1/enterprise/avatar')).status).toBe(204)
  })

  it.each([
    ['not a data URL', 'https://example.com/a.png'],
    ['a text data URL', 'data:text/plain;base64,aGVsbG8='],
    ['an svg', `data:image/svg+xml;base64,${Buffer.from('<svg/>').toString('base64')}`],
    ['bytes that are not the claimed type', dataUrl('image/png', gif)],
    ['an empty image', 'data:image/png;base64,'],
    ['no base64 marker', `data:image/png,${png.toString('base64')}`],
  ])('refuses %s with 400 invalid_image', async (_, value) => {
    const res = await t.call('PUT', '/v1/enterprise/avatar', { body: { dataUrl: value } })
    expect(res.status).toBe(400)
    expect(res.body.error).toBe('invalid_image')
  })

  it('refuses a missing dataUrl naming the field', async () => {
    const res = await t.call('PUT', '/v1/enterprise/avatar', { body: {} })
    expect(res.status).toBe(400)
    expect(res.body.message).toContain('dataUrl')
  })
})

describe('settings (spec: Enterprise settings)', () => {
  const cases = [
    {
      path: 'concurrency',
      field: 'concurrentRunLimit',
      value: 3,
      initial: 10,
      bad: [0, -1, 2.5, '4', null],
    },
    {
      path: 'chat-model-tier',
      field: 'chatModelTier',
      value: 'frontier',
      initial: 'mid',
      bad: ['huge', 3, null],
    },
    {
      path: 'chat-memory-depth',
      field: 'chatMemoryDepth',
      value: 'large',
      initial: 'medium',
      bad: ['deep', 1],
    },
    {
      path: 'metrics',
      field: 'metrics',
      value: ['revenue', 'tickets closed'],
      initial: [],
      bad: ['x', [''], [3]],
    },
  ] as const

  for (const c of cases) {
    describe(`/v1/enterprise/${c.path}`, () => {
      commonRouteChecks(() => t, { method: 'GET', path: () => `/v1/enterprise/${c.path}` })
      commonRouteChecks(() => t, {
        method: 'PATCH',
        path: () => `/v1/enterprise/${c.path}`,
        body: () => ({ [c.field]: c.value }),
      })

      it('reads the default, sets a value, and setting it twice leaves the same value', async () => {
        const fresh = await t.createEnterprise(`Fresh ${c.path}`)
        const before = await t.call('GET', `/v1/enterprise/${c.path}`, { token: fresh.token })
        expect(before.status).toBe(200)
        expect(before.body[c.field]).toEqual(c.initial)
        for (let i = 0; i < 2; i++) {
          const set = await t.call('PATCH', `/v1/enterprise/${c.path}`, {
            token: fresh.token,
            body: { [c.field]: c.value },
          })
          expect(set.status).toBe(200)
          expect(set.body[c.field]).toEqual(c.value)
        }
        const after = await t.call('GET', `/v1/enterprise/${c.path}`, { token: fresh.token })
        expect(after.body[c.field]).toEqual(c.value)
      })

      it.each(c.bad.map((v) => [JSON.stringify(v), v]))(
        'refuses %s with a 400 naming the field',
        async (_, bad) => {
          const res = await t.call('PATCH', `/v1/enterprise/${c.path}`, {
            body: { [c.field]: bad },
          })
          expect(res.status).toBe(400)
          expect(res.body.error).toBe('invalid_request')
          expect(res.body.message).toContain(c.field)
        },
      )
    })
  }

  it('shows a change made through another osd process once it is announced', async () => {
    const { createApp } = await import('../../../server/http/app.js')
    const second = createApp({ sql: t.sql, config: t.config, log: t.log, sealer: t.sealer })
    const read = async () =>
      (
        (await (
          await second.request('/v1/enterprise/concurrency', {
            headers: { authorization: `Bearer ${t.acme.token}` },
          })
        ).json()) as {
          concurrentRunLimit: number
        }
      ).concurrentRunLimit
    await t.call('PATCH', '/v1/enterprise/concurrency', { body: { concurrentRunLimit: 21 } })
    await eventually(async () => (await read()) === 21, 1000) // now cached in the second app
    await t.call('PATCH', '/v1/enterprise/concurrency', { body: { concurrentRunLimit: 22 } })
    // The writer reads its own write at once; the other process as soon as the NOTIFY arrives.
    expect((await t.call('GET', '/v1/enterprise/concurrency')).body.concurrentRunLimit).toBe(22)
    await eventually(async () => (await read()) === 22, 1000)
  })

  it('lists the depths to choose from with the chat memory depth', async () => {
    const res = await t.call('GET', '/v1/enterprise/chat-memory-depth')
    expect(res.body.depths).toEqual(['off', 'small', 'medium', 'large'])
  })
})

describe('GET /v1/enterprise', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/enterprise' })

  it('answers the enterprise and the calling token, never its secret', async () => {
    const token = await t.tokenWith(['enterprise:read', 'tasks:write'])
    const res = await t.call('GET', '/v1/enterprise', { token })
    expect(res.status).toBe(200)
    expect(res.body.enterprise).toEqual({ id: t.acme.id, slug: t.acme.slug, name: 'Acme' })
    expect(res.body.token).toMatchObject({
      name: 'scoped',
      scopes: ['enterprise:read', 'tasks:write'],
      lastChars: token.slice(-4),
    })
    expect(res.text).not.toContain(token)
  })
})

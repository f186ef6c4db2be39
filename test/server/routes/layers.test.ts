import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { ApiError } from '../../../shared/errors.js'
import { LlmBinding } from '../../../shared/schemas/models.js'
import { SpendView } from '../../../shared/schemas/spend.js'
import { ToolConnection } from '../../../shared/schemas/tools.js'
import { llmLayers } from '../../../shared/values.js'
import { layerOwner, type Layer } from '../../../server/domain/tasks/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'

// Settings on a layer (spec: Endpoints Models, Spend, Tools): model keys, spend caps and tool
// connections name their layer by one rule (server/domain/tasks/layers.ts).

let t: TestApp
let own: { team: string; member: string }
let foreign: { team: string; member: string; role: string }

beforeAll(async () => {
  t = await createTestApp()
  const first = async (path: string, token?: string) =>
    (await t.call('GET', path, token ? { token } : {})).body[0].id as string
  own = { team: await first('/v1/teams'), member: await first('/v1/members') }
  foreign = {
    team: await first('/v1/teams', t.other.token),
    member: await first('/v1/members', t.other.token),
    role: await first('/v1/roles', t.other.token),
  }
})

/** A 400 invalid_request whose message names the field, and lists `choices` when given. */
function expectRefused(
  res: { status: number; body: { error: string; message: string } },
  field: string,
  choices: readonly string[] = [],
) {
  expect(res.status, JSON.stringify(res.body)).toBe(400)
  expect(res.body.error).toBe('invalid_request')
  expect(res.body.message).toContain(field)
  for (const choice of choices) expect(res.body.message).toContain(choice)
}

// Names a lookup by the caller's string would find on any plain object.
const objectKeys = ['constructor', '__proto__', 'toString', 'hasOwnProperty']

describe('model keys on a layer (GET and DELETE /v1/llm/bindings)', () => {
  it('refuses a layer that is not one of enterprise, team, member with a 400 listing them', async () => {
    for (const layer of ['bogus', 'task', ...objectKeys]) {
      for (const method of ['GET', 'DELETE']) {
        const res = await t.call(method, `/v1/llm/bindings?layer=${layer}&layerId=${randomUUID()}`)
        expectRefused(res, 'layer', llmLayers)
      }
    }
    const noId = await t.call('DELETE', '/v1/llm/bindings?layer=bogus')
    expectRefused(noId, 'layer', llmLayers)
  })

  it('refuses a layerId that is not a UUID with a 400 naming layerId', async () => {
    for (const layerId of ['-1', 'nope', `${randomUUID()}x`]) {
      for (const method of ['GET', 'DELETE']) {
        const res = await t.call(method, `/v1/llm/bindings?layer=member&layerId=${layerId}`)
        expectRefused(res, 'layerId')
      }
    }
  })

  it('refuses a provider that is not one of them with a 400 listing them', async () => {
    const res = await t.call('DELETE', '/v1/llm/bindings?provider=provider_z')
    expectRefused(res, 'provider', ['provider_a', 'provider_b'])
  })

  it("takes the caller's own enterprise id on the enterprise layer, and 404s another", async () => {
    const key = `sk-${randomUUID()}`
    const bound = await t.call('POST', '/v1/llm/bindings', {
      body: { apiKey: key, layer: 'enterprise', layerId: t.acme.id },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
    expect(LlmBinding.parse(bound.body)).toMatchObject({ layer: 'enterprise', layerId: null })
    const listed = await t.call('GET', `/v1/llm/bindings?layer=enterprise&layerId=${t.acme.id}`)
    expect(listed.status).toBe(200)
    expect(listed.body.map((b: LlmBinding) => LlmBinding.parse(b).id)).toEqual([bound.body.id])

    for (const layerId of [t.other.id, randomUUID()]) {
      for (const method of ['GET', 'DELETE']) {
        const res = await t.call(method, `/v1/llm/bindings?layer=enterprise&layerId=${layerId}`)
        expect(res.status).toBe(404)
        expect(res.body.error).toBe('enterprise_not_found')
      }
    }
    const removed = await t.call(
      'DELETE',
      `/v1/llm/bindings?provider=provider_a&layer=enterprise&layerId=${t.acme.id}`,
    )
    expect(removed.status, JSON.stringify(removed.body)).toBe(204)
    expect(await t.sql`select 1 from llm_connections where id = ${bound.body.id}`).toHaveLength(0)
  })

  it("404s a team or member of another enterprise with the layer's own code", async () => {
    for (const [layer, layerId, code] of [
      ['member', foreign.member, 'member_not_found'],
      ['team', foreign.team, 'team_not_found'],
      ['member', randomUUID(), 'member_not_found'],
    ]) {
      for (const method of ['GET', 'DELETE']) {
        const res = await t.call(method, `/v1/llm/bindings?layer=${layer}&layerId=${layerId}`)
        expect(res.status).toBe(404)
        expect(res.body.error).toBe(code)
      }
    }
  })

  it('removes a member key named by layer and layerId, and lists by layer alone', async () => {
    const bound = await t.call('POST', '/v1/llm/bindings', {
      body: { apiKey: `sk-${randomUUID()}`, layer: 'member', layerId: own.member },
    })
    expect(bound.status).toBe(201)
    const members = await t.call('GET', '/v1/llm/bindings?layer=member')
    expect(members.body.map((b: LlmBinding) => b.id)).toEqual([bound.body.id])
    const removed = await t.call(
      'DELETE',
      `/v1/llm/bindings?provider=provider_a&layer=member&layerId=${own.member}`,
    )
    expect(removed.status).toBe(204)
    expect((await t.call('GET', '/v1/llm/bindings?layer=member')).body).toEqual([])
  })
})

describe('spend caps on a layer (PATCH /v1/spend/caps)', () => {
  const cap = (body: object) =>
    t.call('PATCH', '/v1/spend/caps', { body: { moneyCentsDay: 500, ...body } })

  it("takes the enterprise with or without its own id, and 404s another enterprise's", async () => {
    const set = await cap({ layer: 'enterprise', layerId: t.acme.id })
    expect(set.status, JSON.stringify(set.body)).toBe(200)
    expect(SpendView.parse(set.body).caps).toContainEqual({
      layer: 'enterprise',
      layerId: t.acme.id,
      moneyCentsDay: 500,
    })
    expect((await cap({ layer: 'enterprise' })).status).toBe(200)
    for (const layerId of [t.other.id, randomUUID()]) {
      const res = await cap({ layer: 'enterprise', layerId })
      expect(res.status).toBe(404)
      expect(res.body.error).toBe('enterprise_not_found')
    }
  })

  it('refuses a layer spend caps do not take, a missing or malformed layerId, and ids of nothing', async () => {
    for (const layer of ['role', 'bogus', ...objectKeys])
      expectRefused(await cap({ layer, layerId: randomUUID() }), 'layer', [
        'enterprise',
        'team',
        'task',
        'member',
      ])
    expectRefused(await cap({ layer: 'team' }), 'layerId')
    expectRefused(await cap({ layer: 'member', layerId: '-1' }), 'layerId')
    for (const [layer, layerId, code] of [
      ['team', foreign.team, 'team_not_found'],
      ['member', foreign.member, 'member_not_found'],
      ['task', randomUUID(), 'task_not_found'],
    ]) {
      const res = await cap({ layer, layerId })
      expect(res.status).toBe(404)
      expect(res.body.error).toBe(code)
    }
  })
})

describe('tool connections on a layer (GET /v1/tools/bindings)', () => {
  it('refuses a layer that is not one of them, and a layerId that is not a UUID, with a 400', async () => {
    for (const layer of ['bogus', ...objectKeys])
      expectRefused(
        await t.call('GET', `/v1/tools/bindings?layer=${layer}&layerId=${randomUUID()}`),
        'layer',
        ['enterprise', 'team', 'member', 'role', 'task'],
      )
    expectRefused(await t.call('GET', '/v1/tools/bindings?layer=member&layerId=-1'), 'layerId')
    expectRefused(await t.call('GET', '/v1/tools/bindings?layerId=-1'), 'layerId')
  })

  it("lists the enterprise's own connections by its id, and 404s ids of nothing here", async () => {
    const [made] = await t.sql<{ id: string }[]>`
      insert into tool_connections (enterprise_id, name, kind, url, layer)
      values (${t.acme.id}, 'billing', 'mcp', 'http://127.0.0.1:1/mcp', 'enterprise') returning id`
    const listed = await t.call('GET', `/v1/tools/bindings?layer=enterprise&layerId=${t.acme.id}`)
    expect(listed.status, JSON.stringify(listed.body)).toBe(200)
    expect(listed.body.map((c: ToolConnection) => ToolConnection.parse(c).id)).toEqual([made!.id])
    for (const [layer, layerId, code] of [
      ['enterprise', t.other.id, 'enterprise_not_found'],
      ['team', foreign.team, 'team_not_found'],
      ['role', foreign.role, 'role_not_found'],
      ['task', randomUUID(), 'task_not_found'],
    ]) {
      const res = await t.call('GET', `/v1/tools/bindings?layer=${layer}&layerId=${layerId}`)
      expect(res.status).toBe(404)
      expect(res.body.error).toBe(code)
    }
  })

  it('refuses the enterprise layer to a token even with its own id: 403 ceo_bind_only', async () => {
    const res = await t.call('POST', '/v1/tools/bindings', {
      body: { name: 'crm', url: 'http://127.0.0.1:1/mcp', layer: 'enterprise', layerId: t.acme.id },
    })
    expect(res.status).toBe(403)
    expect(res.body.error).toBe('ceo_bind_only')
    const onTeam = await t.call('POST', '/v1/tools/bindings', {
      body: { name: 'crm', url: 'http://127.0.0.1:1/mcp', layer: 'team', layerId: own.team },
    })
    expect(onTeam.status, JSON.stringify(onTeam.body)).toBe(201)
  })
})

describe('layerOwner, the one rule', () => {
  it('refuses a layer the kind of setting does not take, listing those it takes', async () => {
    const refused = layerOwner<Layer>(t.sql, t.acme.id, llmLayers, 'task', randomUUID())
    await expect(refused).rejects.toBeInstanceOf(ApiError)
    await expect(refused).rejects.toMatchObject({
      code: 'invalid_request',
      message: expect.stringContaining('enterprise, team, member'),
    })
  })

  it("answers the layer's 404, not a database error, for a malformed id", async () => {
    await expect(
      layerOwner(t.sql, t.acme.id, ['member'] as const, 'member', '-1'),
    ).rejects.toMatchObject({ code: 'member_not_found' })
  })
})

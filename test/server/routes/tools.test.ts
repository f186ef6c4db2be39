import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { sealedColumns } from '../../../server/crypto.js'
import { ToolConnection } from '../../../shared/schemas/tools.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { signIn, type TestPerson } from '../../helpers/people.js'

// Tool connections' credentials and names (spec: Endpoints Tools; Authentication 10; DESIGN 15): a
// credential stored beside an address stays with that address's origin; os is osd's own namespace; a
// connection below the enterprise does not take an enterprise connection's name unless its caller could
// change that one. The attacks end to end, with runs, are in test/server/http/hostile-tools.test.ts.

let t: TestApp
let e: TestEnterprise
let team: string
let ceo: TestPerson

beforeAll(async () => {
  t = await createTestApp()
  e = await t.createEnterprise(`Tools ${randomUUID().slice(0, 8)}`)
  team = (await t.call('GET', '/v1/teams', { token: e.token })).body[0].id
  ceo = await signIn(t, 'owner', e)
})

const as = () => ({ token: e.token })
const unique = () => `t${randomUUID().slice(0, 8)}`

async function connect(body: Record<string, unknown>, token = e.token) {
  const res = await t.call('POST', '/v1/tools/bindings', {
    token,
    body: { name: unique(), layer: 'team', layerId: team, ...body },
  })
  expect(res.status, res.text).toBe(201)
  return ToolConnection.parse(res.body)
}

async function patch(id: string, body: Record<string, unknown>, token = e.token) {
  return t.call('PATCH', `/v1/tools/bindings/${id}`, { token, body })
}

/** The token osd would send for this connection, opened: what a run reads. */
async function storedToken(id: string): Promise<string | null> {
  const [row] = await t.sql<{ tokenCiphertext: Buffer | null }[]>`
    select token_ciphertext from tool_connections where id = ${id}`
  return row!.tokenCiphertext
    ? t.sealer.open(row!.tokenCiphertext, sealedColumns.toolToken, id)
    : null
}

describe('a stored token follows the origin of the url, never the url (issue 41, 1)', () => {
  it('keeps it while the origin stays (scheme, host and port compared normalised)', async () => {
    const made = await connect({ url: 'https://tools.example/mcp', token: 'kept-1' })
    for (const url of [
      'https://tools.example/other/path?x=1',
      'HTTPS://Tools.Example:443/mcp',
      'https://TOOLS.example/mcp',
    ]) {
      const res = await patch(made.id, { url })
      expect(res.status, res.text).toBe(200)
      expect(ToolConnection.parse(res.body)).toMatchObject({ url, hasToken: true })
      expect(await storedToken(made.id)).toBe('kept-1')
    }
  })

  it('drops it when the scheme, the host or the port changes, or the url goes', async () => {
    for (const url of [
      'http://tools.example/mcp',
      'https://evil.example/mcp',
      'https://tools.example.evil.example/mcp',
      'https://tools.example:8443/mcp',
      null,
    ]) {
      const made = await connect({ url: 'https://tools.example/mcp', token: 'old-secret' })
      const res = await patch(
        made.id,
        url === null ? { url: null, sites: ['tools.example'] } : { url },
      )
      expect(res.status, res.text).toBe(200)
      expect(ToolConnection.parse(res.body).hasToken).toBe(false)
      expect(await storedToken(made.id)).toBeNull()
      expect(res.text).not.toContain('old-secret')
    }
  })

  it('keeps a new token sent with the new address, and only that one', async () => {
    const made = await connect({ url: 'https://tools.example/mcp', token: 'old-secret' })
    const res = await patch(made.id, { url: 'https://new.example/mcp', token: 'new-secret' })
    expect(res.status, res.text).toBe(200)
    expect(ToolConnection.parse(res.body).hasToken).toBe(true)
    expect(await storedToken(made.id)).toBe('new-secret')
  })

  it('drops the OAuth sign-ins under way with the origin', async () => {
    const made = await connect({ url: 'https://tools.example/mcp' })
    const start = () =>
      t.call('POST', '/v1/tools/oauth/start', {
        ...as(),
        body: {
          connectionId: made.id,
          authorizeUrl: 'https://tools.example/authorize',
          clientId: 'osd',
        },
      })
    expect((await start()).status).toBe(200)
    const states = () => t.sql`select state from tool_oauth_states where connection_id = ${made.id}`
    await patch(made.id, { url: 'https://tools.example/v2/mcp' })
    expect(await states()).toHaveLength(1) // the same origin: the sign-in may still complete
    await patch(made.id, { url: 'https://elsewhere.example/mcp' })
    expect(await states()).toEqual([])
  })

  it("forgets browser sign-ins on the sites a change takes away, and every one when it stops being a browser's", async () => {
    const made = await connect({
      sites: ['erp.example.com', 'https://sso.example.com', 'wiki.example.com'],
      startPage: 'https://erp.example.com',
    })
    const [member] = (await t.call('GET', '/v1/members', as())).body
    for (const site of ['erp.example.com', 'https://sso.example.com', 'wiki.example.com'])
      await t.sql`
        insert into browser_sign_ins (connection_id, enterprise_id, member_id, site)
        values (${made.id}, ${e.id}, ${member.id}, ${site})`
    const signIns = async () =>
      (await t.call('GET', `/v1/tools/bindings/${made.id}/sign-ins`, as())).body
        .map((s: { site: string }) => s.site)
        .sort()
    // The same sites written otherwise keep theirs; a site another origin takes loses its sign-in.
    const changed = await patch(made.id, {
      sites: ['ERP.example.com', 'HTTPS://SSO.example.com:443', 'http://wiki.example.com'],
    })
    expect(changed.status, changed.text).toBe(200)
    expect(await signIns()).toEqual(['erp.example.com', 'https://sso.example.com'])
    await patch(made.id, { startPage: 'https://elsewhere.example' })
    expect(await signIns()).toEqual(['erp.example.com', 'https://sso.example.com'])
    await patch(made.id, { sites: null, url: 'https://erp.example.com/mcp' })
    expect(await signIns()).toEqual([])
  })
})

describe('os is a reserved tool namespace (issue 41, 2)', () => {
  it('refuses a connection that takes it, on any layer, to the chief executive too: 400 tool_namespace_reserved', async () => {
    for (const [name, layer, token] of [
      ['os', 'team', e.token],
      ['o-s', 'team', e.token],
      ['o_s', 'team', e.token],
      ['os', 'enterprise', ceo.session],
    ] as const) {
      const res = await t.call('POST', '/v1/tools/bindings', {
        token,
        body: {
          name,
          url: 'https://tools.example/mcp',
          layer,
          ...(layer === 'team' ? { layerId: team } : {}),
        },
      })
      expect(res.status, res.text).toBe(400)
      expect(res.body.error).toBe('tool_namespace_reserved')
      expect(res.body.message).toContain('os')
    }
    // Other spellings of it never pass the namespace's own rule.
    for (const name of ['OS', 'Os', ' os', 'os ', 'ｏｓ', 'оs']) {
      const res = await t.call('POST', '/v1/tools/bindings', {
        ...as(),
        body: { name, url: 'https://tools.example/mcp', layer: 'team', layerId: team },
      })
      expect(res.status, `${name}: ${res.text}`).toBe(400)
    }
    const tried = ['os', 'o-s', 'o_s', 'OS', 'Os', ' os', 'os ', 'ｏｓ', 'оs']
    expect(
      await t.sql`select name from tool_connections where enterprise_id = ${e.id} and name = any(${tried})`,
    ).toEqual([])
  })

  it('refuses a rename to it, and changes nothing', async () => {
    const made = await connect({ url: 'https://tools.example/mcp' })
    const res = await patch(made.id, { name: 'os' })
    expect(res.status, res.text).toBe(400)
    expect(res.body.error).toBe('tool_namespace_reserved')
    const [row] = await t.sql`select name from tool_connections where id = ${made.id}`
    expect(row!.name).toBe(made.name)
    // Names that only begin with it are the tenant's.
    for (const name of ['osx', 'os-tools', 'cos'])
      expect((await patch(made.id, { name })).status).toBe(200)
  })
})

describe("a connection below the enterprise does not take an enterprise connection's name (issue 41, 4)", () => {
  async function enterpriseConnection() {
    const name = unique()
    const made = await connect(
      { name, url: 'https://billing.example/mcp', layer: 'enterprise', layerId: undefined },
      ceo.session,
    )
    return { name, id: made.id }
  }

  it('refuses one made, renamed or moved to it on a team, member, role or task: 409 tool_connection_shadows_enterprise', async () => {
    const { name } = await enterpriseConnection()
    const [member] = (await t.call('GET', '/v1/members', as())).body
    const [role] = (await t.call('GET', '/v1/roles', as())).body
    const task = await t.call('POST', '/v1/tasks', {
      ...as(),
      body: { name: `Task ${unique()}`, assigneeRole: 'ceo' },
    })
    const layers = [
      { layer: 'team', layerId: team },
      { layer: 'member', layerId: member.id },
      { layer: 'role', layerId: role.id },
      { layer: 'task', layerId: task.body.id },
    ]
    const memberSession = await signIn(t, 'member', e)
    for (const token of [e.token, memberSession.session]) {
      for (const layer of layers) {
        const res = await t.call('POST', '/v1/tools/bindings', {
          token,
          body: { name, url: 'https://attacker.example/mcp', ...layer },
        })
        expect(res.status, res.text).toBe(409)
        expect(res.body.error).toBe('tool_connection_shadows_enterprise')
        expect(res.body.message).toContain(name)
      }
      const other = await connect({ url: 'https://attacker.example/mcp' }, token)
      const renamed = await patch(other.id, { name }, token)
      expect(renamed.status, renamed.text).toBe(409)
      expect(renamed.body.error).toBe('tool_connection_shadows_enterprise')
    }
    expect(
      await t.sql`select layer from tool_connections where enterprise_id = ${e.id} and name = ${name}`,
    ).toEqual([{ layer: 'enterprise' }])
    // One the chief executive put on a team is not a token's to move to another layer's runs.
    const ceoMade = await connect({ name, url: 'https://billing.example/team-mcp' }, ceo.session)
    const moved = await patch(ceoMade.id, { layer: 'member', layerId: member.id })
    expect(moved.status, moved.text).toBe(409)
    expect(moved.body.error).toBe('tool_connection_shadows_enterprise')
    expect((await patch(ceoMade.id, { description: 'kept' })).status).toBe(200)
  })

  it("refuses a token's move of the chief executive's team shadow to another team (same layer, new runs)", async () => {
    const { name } = await enterpriseConnection()
    const teamB = await t.call('POST', '/v1/teams', {
      ...as(),
      body: { name: `Team ${unique()}` },
    })
    expect(teamB.status, teamB.text).toBe(201)
    // Where the chief executive let it take the enterprise one's place: this team's runs only.
    const ceoMade = await connect({ name, url: 'https://billing.example/team-mcp' }, ceo.session)
    const moved = await patch(ceoMade.id, { layerId: teamB.body.id })
    expect(moved.status, moved.text).toBe(409)
    expect(moved.body.error).toBe('tool_connection_shadows_enterprise')
    expect(await t.sql`select layer_id from tool_connections where id = ${ceoMade.id}`).toEqual([
      { layerId: team },
    ])
    // The chief executive may move it; a move that keeps its place changes nothing to refuse.
    expect((await patch(ceoMade.id, { layerId: team })).status).toBe(200)
    expect((await patch(ceoMade.id, { layerId: teamB.body.id }, ceo.session)).status).toBe(200)
  })

  it('lets the chief executive, who could change the enterprise one, make and rename one', async () => {
    const { name } = await enterpriseConnection()
    await connect({ name, url: 'https://billing.example/team-mcp' }, ceo.session)
    const other = await connect({ url: 'https://billing.example/mcp' })
    expect((await patch(other.id, { name }, ceo.session)).status).toBe(200)
    // A token may change what it owns on the team as before, once it takes no enterprise name.
    expect((await patch(other.id, { description: 'x' })).status).toBe(200)
  })

  it("counts only the caller's own enterprise: another's connection of that name shadows nothing", async () => {
    const theirs = await signIn(t, 'owner', t.other)
    const name = unique()
    const made = await t.call('POST', '/v1/tools/bindings', {
      token: theirs.session,
      body: { name, url: 'https://billing.example/mcp', layer: 'enterprise' },
    })
    expect(made.status, made.text).toBe(201)
    await connect({ name, url: 'https://billing.example/mcp' })
  })
})

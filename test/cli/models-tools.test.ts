import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TestDatabase } from '../helpers/db.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'
import { startFakeModelProvider, type FakeModelProvider } from '../fakes/model-provider.js'

// osctl llm, spend, tools, plans and members emails against a real daemon, whose model providers are
// the fake (test/fakes/model-provider.ts) and whose provider_b sign-in exchanges codes at a small token
// endpoint of this file. osctl runs in process (issue 28).

let db: TestDatabase
let fake: FakeModelProvider
let tokenEndpoint: http.Server
let env: Record<string, string>
let enterpriseId: string
let json: CliDaemon['json']
let generalId: string
let ada: { id: string; email: string }

/** The access token the sign-in hands out: it must never reach osctl's output. */
const accessToken = `sub-access-${randomBytes(12).toString('hex')}`

/** osctl without --json: exit 0; its stdout. */
const human = async (args: string[], input?: string) => {
  const res = await osctl(args, env, input)
  expect(res.exitCode, res.stderr).toBe(0)
  return res.stdout
}

const exitOf = async (args: string[], input?: string) => (await osctl(args, env, input)).exitCode

beforeAll(async () => {
  fake = await startFakeModelProvider()
  tokenEndpoint = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ access_token: accessToken, refresh_token: 'r', expires_in: 3600 }))
    })
  })
  await new Promise<void>((resolve) => tokenEndpoint.listen(0, '127.0.0.1', resolve))
  const tokenUrl = `http://127.0.0.1:${(tokenEndpoint.address() as AddressInfo).port}/token`
  const cli = await startCliDaemon('Models Cli', {
    OSD_PROVIDER_A_BASE_URL: fake.url,
    OSD_PROVIDER_B_BASE_URL: fake.url,
    OSD_PROVIDER_B_OAUTH_CLIENT_ID: 'osctl-test',
    OSD_PROVIDER_B_OAUTH_TOKEN_URL: tokenUrl,
  })
  db = cli.db
  env = cli.env
  enterpriseId = cli.enterprise.id
  json = cli.json
  generalId = (await json(['teams', 'get', 'general'])).id
  ada = await json(['members', 'create', '--name', 'Ada'])
})

afterAll(async () => {
  await fake?.close()
  await new Promise((resolve) => tokenEndpoint?.close(resolve))
})

describe('osctl llm', () => {
  const key = `sk-test-${randomBytes(16).toString('hex')}`
  const teamKey = `sk-team-${randomBytes(16).toString('hex')}`

  it('sets keys from stdin, lists and removes them, and never prints a key', async () => {
    const set = await osctl(['llm', 'bindings', 'set', '--key-stdin'], env, `${key}\n`)
    expect(set.exitCode, set.stderr).toBe(0)
    expect(set.stdout).toBe(`provider_a key …${key.slice(-4)} connected on the enterprise\n`)
    const onTeam = await json(
      ['llm', 'bindings', 'set', '--key-stdin', '--provider', 'provider_b', '--team', 'general'],
      teamKey,
    )
    expect(onTeam).toMatchObject({
      provider: 'provider_b',
      layer: 'team',
      layerId: generalId,
      connected: true,
      keyHint: `…${teamKey.slice(-4)}`,
    })

    const all = await json(['llm', 'bindings', 'list'])
    expect(all.map((b: { layer: string }) => b.layer).sort()).toEqual(['enterprise', 'team'])
    expect(await json(['llm', 'bindings', 'list', '--team', 'general'])).toMatchObject([
      { provider: 'provider_b', layerId: generalId },
    ])
    expect(
      await json(['llm', 'bindings', 'list', '--layer', 'team', '--layer-id', 'general']),
    ).toHaveLength(1)
    expect(await json(['llm', 'bindings', 'list', '--member', ada.email])).toEqual([])
    const table = await human(['llm', 'bindings', 'list'])
    expect(table).toMatch(/^PROVIDER\s+LAYER\s+LAYER ID\s+KEY/)
    expect(table).toMatch(
      new RegExp(`^provider_b\\s+team\\s+${generalId}\\s+…${teamKey.slice(-4)}`, 'm'),
    )

    // The connections list shows where keys are and their last characters, never a key.
    const connections = await osctl(['--json', 'llm', 'connections', 'list'], env)
    const humanConnections = await human(['llm', 'connections', 'list'])
    for (const output of [connections.stdout, humanConnections, table]) {
      expect(output).not.toContain(key)
      expect(output).not.toContain(teamKey)
    }
    const enterpriseKey = JSON.parse(connections.stdout).find(
      (c: { layer: string }) => c.layer === 'enterprise',
    )
    expect(enterpriseKey).toMatchObject({ provider: 'provider_a', kind: 'api_key' })

    // Usage errors: no key, two layers, a key both ways.
    expect(await exitOf(['llm', 'bindings', 'set'])).toBe(2)
    expect(await exitOf(['llm', 'bindings', 'set', '--key', key, '--key-stdin'], key)).toBe(2)
    expect(
      await exitOf(
        ['llm', 'bindings', 'set', '--key-stdin', '--team', 'general', '--member', 'Ada'],
        key,
      ),
    ).toBe(2)

    expect(
      await exitOf(['llm', 'bindings', 'remove', '--provider', 'provider_b', '--team', 'general']),
    ).toBe(2)
    const removed = await human([
      'llm',
      'bindings',
      'remove',
      '--provider',
      'provider_b',
      '--team',
      'general',
      '--yes',
    ])
    expect(removed).toBe('provider_b key of team general removed\n')
    expect(await json(['llm', 'bindings', 'list'])).toMatchObject([{ layer: 'enterprise' }])
  })

  it('renames a connection and reads its usage', async () => {
    const [connection] = await json(['llm', 'connections', 'list'])
    const renamed = await json([
      'llm',
      'connections',
      'update',
      connection.id,
      '--name',
      'Research key',
      '--description',
      'for the research team',
    ])
    expect(renamed).toMatchObject({ name: 'Research key', description: 'for the research team' })
    const plan = await osctl(['llm', 'connections', 'update', connection.id, '--plan', 'pro'], env)
    expect(plan.exitCode).toBe(1) // an API key has no plan
    expect(plan.stderr).toMatch(/^error: invalid_request: .*\(400\)$/m)
    expect(await exitOf(['llm', 'connections', 'update', 'research-key', '--name', 'x'])).toBe(2)

    expect(await json(['llm', 'connections', 'usage', connection.id])).toEqual({
      connectionId: connection.id,
      days: [],
    })
    await db.sql`
      insert into llm_usage (connection_id, enterprise_id, day, model, calls, input_tokens, cache_read_tokens,
                             cache_write_tokens, output_tokens, cost_usd_micros)
      values (${connection.id}, ${enterpriseId}, current_date, 'claude-sonnet-5-5', 2, 1200, 9000, 1500, 300, 12345)`
    const usage = await human(['llm', 'connections', 'usage', connection.id])
    // Each kind of token in its column: input at full price, cache read, cache write, output.
    expect(usage).toMatch(
      /^\d{4}-\d\d-\d\d\s+claude-sonnet-5-5\s+2\s+1200\s+9000\s+1500\s+300\s+\$0\.0123$/m,
    )
    expect(usage).toMatch(/INPUT TOKENS\s+CACHE READ\s+CACHE WRITE\s+OUTPUT TOKENS/)
  })

  it('lists tiers, overrides one, and lists the models the provider offers', async () => {
    const tiers = await json(['llm', 'tiers'])
    expect(tiers.tiers.provider_a.mid).toEqual({ model: 'claude-sonnet-5-5', overridden: false })
    const overridden = await json([
      'llm',
      'tiers',
      'override',
      '--provider',
      'provider_a',
      '--tier',
      'mid',
      '--model',
      'claude-sonnet-4-6',
    ])
    expect(overridden.tiers.provider_a.mid).toEqual({
      model: 'claude-sonnet-4-6',
      overridden: true,
    })
    expect(await human(['llm', 'tiers', 'list'])).toMatch(
      /^provider_a\s+mid\s+claude-sonnet-4-6\s+yes$/m,
    )
    expect(
      await exitOf([
        'llm',
        'tiers',
        'override',
        '--provider',
        'provider_c',
        '--tier',
        'mid',
        '--model',
        'm',
      ]),
    ).toBe(2)

    // The enterprise's provider_a key is connected: the list is the (fake) provider's own.
    fake.setModels('a', ['claude-fake-model-1', 'claude-fake-model-2'])
    const { models } = await json(['llm', 'models'])
    expect(models).toContainEqual({
      provider: 'provider_a',
      id: 'claude-fake-model-1',
      source: 'provider',
    })
    expect(models.every((m: { provider: string }) => m.provider === 'provider_a')).toBe(true)
    expect(await human(['llm', 'models'])).toMatch(/^provider_a\s+claude-fake-model-2\s+provider$/m)
  })

  it('connects a provider_b subscription by sign-in, and sets its plan', async () => {
    const started = await json(['llm', 'oauth', 'start', '--member', 'Ada'])
    const url = new URL(started.url)
    expect(url.searchParams.get('client_id')).toBe('osctl-test')
    expect(url.searchParams.get('state')).toBe(started.state)
    const humanStart = await osctl(['llm', 'oauth', 'start'], env)
    expect(humanStart.stdout).toMatch(/^url\s+https:\/\/.*$/m)
    expect(humanStart.stderr).toContain('osctl llm oauth complete --code CODE --state STATE')

    const res = await osctl(
      ['--json', 'llm', 'oauth', 'complete', '--code', 'the-code', '--state', started.state],
      env,
    )
    expect(res.exitCode, res.stderr).toBe(0)
    expect(res.stdout).not.toContain(accessToken)
    const connection = JSON.parse(res.stdout)
    expect(connection).toMatchObject({
      provider: 'provider_b',
      kind: 'subscription',
      layer: 'member',
      layerId: ada.id,
    })
    const withPlan = await json(['llm', 'connections', 'update', connection.id, '--plan', 'pro'])
    expect(withPlan.plan).toBe('pro')
    expect(await human(['llm', 'connections', 'list'])).not.toContain(accessToken)
    // A state is good once.
    const again = await osctl(
      ['llm', 'oauth', 'complete', '--code', 'c', '--state', started.state],
      env,
    )
    expect(again.exitCode).toBe(1)
  })
})

describe('osctl spend', () => {
  it('shows spend, sets and clears caps on layers named by slug, turns limits off and on', async () => {
    expect(await json(['spend'])).toMatchObject({ enabled: true, today: [], caps: [] })

    const enterpriseCap = await json([
      'spend',
      'caps',
      'set',
      '--layer',
      'enterprise',
      '--cents',
      '50000',
    ])
    expect(enterpriseCap.caps).toEqual([
      { layer: 'enterprise', layerId: enterpriseId, moneyCentsDay: 50000 },
    ])
    const teamCap = await json([
      'spend',
      'caps',
      'set',
      '--layer',
      'team',
      '--id',
      'general',
      '--cents',
      '2500',
    ])
    expect(teamCap.caps).toContainEqual({ layer: 'team', layerId: generalId, moneyCentsDay: 2500 })
    const memberCap = await json([
      'spend',
      'caps',
      'set',
      '--layer',
      'member',
      '--id',
      ada.email,
      '--cents',
      '100',
    ])
    expect(memberCap.caps).toContainEqual({ layer: 'member', layerId: ada.id, moneyCentsDay: 100 })

    const shown = await human(['spend', 'show'])
    expect(shown).toMatch(/^limits\s+on$/m)
    expect(shown).toMatch(new RegExp(`^team\\s+${generalId}\\s+\\$25\\.00/day\\s+\\$0\\.00$`, 'm'))
    expect(shown).toMatch(/^enterprise\s+-\s+\$500\.00\/day/m)

    expect(await exitOf(['spend', 'caps', 'set', '--layer', 'task', '--cents', '5'])).toBe(2)
    expect(
      await exitOf([
        'spend',
        'caps',
        'set',
        '--layer',
        'enterprise',
        '--id',
        'general',
        '--cents',
        '5',
      ]),
    ).toBe(2)
    expect(await exitOf(['spend', 'caps', 'set', '--layer', 'enterprise', '--cents', '1.5'])).toBe(
      2,
    )
    expect(await exitOf(['spend', 'caps', 'set', '--layer', 'galaxy', '--cents', '5'])).toBe(2)
    const missingTask = await osctl(
      ['spend', 'caps', 'set', '--layer', 'task', '--id', 'nope', '--cents', '5'],
      env,
    )
    expect(missingTask.exitCode).toBe(1)
    expect(missingTask.stderr).toContain('no task "nope"')

    expect(await exitOf(['spend', 'caps', 'clear', '--layer', 'team', '--id', 'general'])).toBe(2)
    const cleared = await json([
      'spend',
      'caps',
      'clear',
      '--layer',
      'team',
      '--id',
      'general',
      '--yes',
    ])
    expect(cleared.caps.map((c: { layer: string }) => c.layer).sort()).toEqual([
      'enterprise',
      'member',
    ])

    expect(await exitOf(['spend', 'disable'])).toBe(2)
    expect((await json(['spend', 'disable', '--yes'])).enabled).toBe(false)
    expect(await human(['spend'])).toMatch(/^limits\s+off/m)
    expect((await json(['spend', 'enable'])).enabled).toBe(true)
  })
})

describe('osctl tools', () => {
  const token = `vcs-token-${randomBytes(16).toString('hex')}`

  it('connects a tool server on a team with a token from stdin, never printing it', async () => {
    const res = await osctl(
      [
        '--json',
        'tools',
        'bindings',
        'create',
        '--name',
        'vcs',
        '--tool-url',
        'http://127.0.0.1:9/mcp',
        '--token-stdin',
        '--layer',
        'team',
        '--on',
        'general',
      ],
      env,
      `${token}\n`,
    )
    expect(res.exitCode, res.stderr).toBe(0)
    expect(res.stdout).not.toContain(token)
    const vcs = JSON.parse(res.stdout)
    expect(vcs).toMatchObject({
      name: 'vcs',
      kind: 'mcp',
      url: 'http://127.0.0.1:9/mcp',
      hasToken: true,
      layer: 'team',
      layerId: generalId,
      mustGate: ['vcs.merge_pull_request'],
    })

    const list = await osctl(['--json', 'tools', 'bindings', 'list'], env)
    const table = await human(['tools', 'bindings', 'list'])
    for (const output of [list.stdout, table]) expect(output).not.toContain(token)
    expect(JSON.parse(list.stdout)).toMatchObject([{ id: vcs.id, hasToken: true }])
    expect(table).toMatch(
      /^vcs\s+mcp\s+team\s+\S+\s+http:\/\/127\.0\.0\.1:9\/mcp\s+vcs\.merge_pull_request/m,
    )
    expect(
      await json(['tools', 'bindings', 'list', '--layer', 'team', '--layer-id', 'general']),
    ).toHaveLength(1)
    expect(await json(['tools', 'bindings', 'list', '--layer', 'member'])).toEqual([])
    const shown = await human([
      'tools',
      'bindings',
      'update',
      vcs.id,
      '--description',
      'Code host',
      '--tool-token',
      `${token}-2`,
    ])
    expect(shown).toMatch(/^token\s+kept \(never shown\)$/m)
    expect(shown).toMatch(/^description\s+Code host$/m)
    expect(shown).not.toContain(token)

    const moved = await json([
      'tools',
      'bindings',
      'update',
      vcs.id,
      '--layer',
      'member',
      '--on',
      'Ada',
    ])
    expect(moved).toMatchObject({ layer: 'member', layerId: ada.id, description: 'Code host' })
    expect(await exitOf(['tools', 'bindings', 'update', vcs.id, '--on', 'general'])).toBe(2)

    expect(await exitOf(['tools', 'bindings', 'delete', vcs.id])).toBe(2)
    expect(await human(['tools', 'bindings', 'delete', vcs.id, '--yes'])).toBe(
      `removed tool connection ${vcs.id}\n`,
    )
    expect(await json(['tools', 'bindings', 'list'])).toEqual([])
  })

  it('refuses a connection on the enterprise: ceo_bind_only', async () => {
    const res = await osctl(
      [
        'tools',
        'bindings',
        'create',
        '--name',
        'wiki',
        '--tool-url',
        'http://127.0.0.1:9/mcp',
        '--layer',
        'enterprise',
      ],
      env,
    )
    expect(res.exitCode).toBe(4) // 403: credentials (issue 51)
    expect(res.stderr).toMatch(/^error: ceo_bind_only: .*\(403\)$/m)
    expect(
      await exitOf([
        'tools',
        'bindings',
        'create',
        '--name',
        'wiki',
        '--tool-url',
        'http://x.test',
        '--layer',
        'team',
      ]),
    ).toBe(2)
  })

  it('connects a browser system, lists and forgets sign-ins, and starts OAuth', async () => {
    const crm = await json([
      'tools',
      'bindings',
      'create',
      '--name',
      'crm',
      '--site',
      'crm.example.com',
      '--site',
      'wiki.example.com',
      '--start-page',
      'https://crm.example.com/home',
      '--layer',
      'member',
      '--on',
      ada.email,
    ])
    expect(crm).toMatchObject({
      kind: 'browser',
      sites: ['crm.example.com', 'wiki.example.com'],
      hasToken: false,
      mustGate: [],
    })
    await db.sql`
      insert into browser_sign_ins (connection_id, enterprise_id, member_id, site)
      values (${crm.id}, ${enterpriseId}, ${ada.id}, 'crm.example.com'),
             (${crm.id}, ${enterpriseId}, ${ada.id}, 'wiki.example.com')`
    const signIns = await json(['tools', 'bindings', 'sign-ins', crm.id])
    expect(signIns.map((s: { site: string }) => s.site)).toEqual([
      'crm.example.com',
      'wiki.example.com',
    ])
    expect(await human(['tools', 'bindings', 'sign-ins', crm.id])).toMatch(
      new RegExp(`^${ada.id}\\s+wiki\\.example\\.com\\s`, 'm'),
    )
    expect(
      await exitOf([
        'tools',
        'bindings',
        'forget-sign-in',
        crm.id,
        'Ada',
        '--site',
        'crm.example.com',
      ]),
    ).toBe(2)
    await human([
      'tools',
      'bindings',
      'forget-sign-in',
      crm.id,
      'Ada',
      '--site',
      'crm.example.com',
      '--yes',
    ])
    expect(await json(['tools', 'bindings', 'sign-ins', crm.id])).toMatchObject([
      { site: 'wiki.example.com' },
    ])

    const { redirectUri } = await json(['tools', 'oauth', 'redirect-uri'])
    expect(redirectUri).toMatch(/\/v1\/tools\/oauth\/callback$/)
    expect(await human(['tools', 'oauth', 'redirect-uri'])).toBe(`${redirectUri}\n`)
    const started = await json([
      'tools',
      'oauth',
      'start',
      '--connection',
      crm.id,
      '--authorize-url',
      'https://auth.example.com/authorize',
      '--client-id',
      'client-1',
      '--scope',
      'read',
    ])
    const url = new URL(started.url)
    expect(url.origin).toBe('https://auth.example.com')
    expect(url.searchParams.get('redirect_uri')).toBe(redirectUri)
    expect(url.searchParams.get('state')).toBe(started.state)
  })
})

describe('osctl plans', () => {
  it('lists plans with filters and reads one with its items', async () => {
    const runId = '6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f'
    const [plan] = await db.sql<{ id: string }[]>`
      insert into plans (enterprise_id, title, items, produced_by_run_id)
      values (${enterpriseId}, 'Ship the report', ${db.sql.json([{ title: 'Draft', detail: 'two pages' }, { title: 'Review' }])}, ${runId})
      returning id`
    expect(await json(['plans', 'list'])).toMatchObject([
      { id: plan!.id, title: 'Ship the report' },
    ])
    expect(await json(['plans', 'list', '--status', 'proposed', '--run', runId])).toHaveLength(1)
    expect(await json(['plans', 'list', '--status', 'done'])).toEqual([])
    expect(await human(['plans', 'list'])).toMatch(/^Ship the report\s+run\s+proposed\s+2\s/m)
    expect(await exitOf(['plans', 'list', '--run', 'nightly'])).toBe(2)

    expect(await json(['plans', 'get', plan!.id])).toMatchObject({
      title: 'Ship the report',
      items: [{ title: 'Draft' }, { title: 'Review' }],
      producedByRunId: runId,
      gates: [],
    })
    const shown = await human(['plans', 'get', plan!.id])
    expect(shown).toContain('  1. Draft\n     two pages\n  2. Review')
    const missing = await osctl(['plans', 'get', runId], env)
    expect(missing.exitCode).toBe(1)
    expect(missing.stderr).toContain('plan_not_found')
  })
})

describe('osctl members emails', () => {
  it('lists an inbox, opens an email (which marks it read) and saves an attachment', async () => {
    const [first] = await db.sql<{ id: string }[]>`
      insert into member_emails (enterprise_id, member_id, from_address, to_address, subject, body, received_at)
      values (${enterpriseId}, ${ada.id}, 'grace@example.com', ${ada.email}, 'Invoice', 'Attached.', now() - interval '1 hour')
      returning id`
    await db.sql`
      insert into member_emails (enterprise_id, member_id, from_address, to_address, subject, body)
      values (${enterpriseId}, ${ada.id}, 'linus@example.com', ${ada.email}, 'Hello', 'Hi Ada')`
    const [attachment] = await db.sql<{ id: string }[]>`
      insert into email_attachments (email_id, filename, content_type, data)
      values (${first!.id}, 'invoice.txt', 'text/plain', ${Buffer.from('total: 42\n')})
      returning id`

    const inbox = await json(['members', 'emails', 'list', 'Ada'])
    expect(inbox).toMatchObject({ total: 2, page: 1 })
    expect(inbox.data.map((e: { subject: string }) => e.subject)).toEqual(['Hello', 'Invoice'])
    const oldestFirst = await json([
      'members',
      'emails',
      'list',
      ada.email,
      '--order',
      'asc',
      '--all',
    ])
    expect(oldestFirst.map((e: { subject: string }) => e.subject)).toEqual(['Invoice', 'Hello'])
    expect((await json(['members', 'emails', 'list', 'Ada', '--unread'])).total).toBe(2)
    expect(await human(['members', 'emails', 'list', 'Ada'])).toMatch(
      /^\S+\s+grace@example\.com\s+Invoice\s+no\s/m,
    )
    const paged = await osctl(['members', 'emails', 'list', 'Ada', '--limit', '1'], env)
    expect(paged.stderr).toMatch(/page 1 of 2, 2 emails/)

    const opened = await json(['members', 'emails', 'get', 'Ada', first!.id])
    expect(opened).toMatchObject({
      subject: 'Invoice',
      read: true,
      attachments: [{ id: attachment!.id, filename: 'invoice.txt', bytes: 10 }],
    })
    expect((await json(['members', 'emails', 'list', 'Ada', '--unread'])).data).toMatchObject([
      { subject: 'Hello' },
    ])
    const shown = await human(['members', 'emails', 'get', 'Ada', first!.id])
    expect(shown).toMatch(/^subject\s+Invoice$/m)
    expect(shown).toMatch(/\n\nAttached\.\n$/)

    const file = join(await mkdtemp(join(tmpdir(), 'osctl-mail-')), 'invoice.txt')
    const saved = await json([
      'members',
      'emails',
      'attachment',
      'Ada',
      first!.id,
      attachment!.id,
      '-o',
      file,
    ])
    expect(saved).toMatchObject({ file, bytes: 10 })
    expect(await readFile(file, 'utf8')).toBe('total: 42\n')
    const missing = await osctl(
      ['members', 'emails', 'attachment', 'Ada', first!.id, first!.id, '-o', file],
      env,
    )
    expect(missing.exitCode).toBe(1)
    expect(await exitOf(['members', 'emails', 'get', 'Ada', 'invoice'])).toBe(2)
  })
})

describe('--json', () => {
  it('prints the API JSON and nothing else', async () => {
    for (const args of [
      ['llm', 'connections', 'list'],
      ['llm', 'bindings', 'list'],
      ['llm', 'tiers'],
      ['llm', 'models'],
      ['llm', 'oauth', 'start'],
      ['spend'],
      ['tools', 'bindings', 'list'],
      ['tools', 'oauth', 'redirect-uri'],
      ['plans', 'list'],
      ['members', 'emails', 'list', 'Ada', '--limit', '1'],
    ]) {
      const res = await osctl(['--json', ...args], env)
      expect(res.exitCode, `${args.join(' ')}: ${res.stderr}`).toBe(0)
      expect(res.stderr, args.join(' ')).toBe('')
      expect(() => JSON.parse(res.stdout), args.join(' ')).not.toThrow()
    }
    // A refusal: the error on stderr, the API's body (and only it) on stdout.
    const refused = await osctl(
      [
        '--json',
        'tools',
        'bindings',
        'create',
        '--name',
        'wiki',
        '--tool-url',
        'http://127.0.0.1:9/mcp',
        '--layer',
        'enterprise',
      ],
      env,
    )
    expect(refused.exitCode).toBe(4) // 403: credentials (issue 51)
    expect(JSON.parse(refused.stdout)).toMatchObject({ error: 'ceo_bind_only' })
  })
})

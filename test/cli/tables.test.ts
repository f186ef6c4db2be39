import { randomUUID } from 'node:crypto'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { listSessions } from '../../cli/commands/auth.js'
import { listBlockers } from '../../cli/commands/blockers.js'
import { listEntries, listRoleEntries } from '../../cli/commands/catalog.js'
import { listChats } from '../../cli/commands/chats.js'
import { listConnections as listAppConnections } from '../../cli/commands/connections.js'
import { listEnterprises } from '../../cli/commands/enterprises.js'
import { listExecutions } from '../../cli/commands/executions.js'
import { listGates } from '../../cli/commands/gates.js'
import {
  listBindings,
  listConnections as listLlmConnections,
  listTiers,
} from '../../cli/commands/llm.js'
import { listEmails, listMembers } from '../../cli/commands/members.js'
import { listNotes, listReview, reviewHistory, taskMemory } from '../../cli/commands/memory.js'
import { listPlans } from '../../cli/commands/plans.js'
import { listProfiles } from '../../cli/commands/profile.js'
import { listRecommendations } from '../../cli/commands/recommendations.js'
import { listRoles } from '../../cli/commands/roles.js'
import { listRuns } from '../../cli/commands/runs.js'
import { listTasks, listVersions } from '../../cli/commands/tasks.js'
import { listTeams } from '../../cli/commands/teams.js'
import { listTokens } from '../../cli/commands/tokens.js'
import { listConnections as listToolConnections } from '../../cli/commands/tools.js'
import { listInvites, listUsers } from '../../cli/commands/users.js'
import { listDeliveries } from '../../cli/commands/webhooks.js'
import type { Deps } from '../../cli/deps.js'
import { printTable, type Output } from '../../cli/output.js'
import { loadProfileStore, ProfileStore } from '../../cli/profiles.js'
import { FakeApi, fakeDeps, type Sent } from '../helpers/cli.js'

// ProfileStore reads conf, loaded once (cli/profiles.ts).
beforeAll(() => loadProfileStore())

// Tables never cut an id (issue 27): the id is what the next command needs. On a terminal narrower
// than the table the other columns (names, summaries) give way; on a pipe every column is whole.

const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g
/** The start of a UUID cut short with an ellipsis: what a table must never print. */
const cutUuid = /[0-9a-f]{8}-[0-9a-f-]{0,27}…/

function captured(opts: { tty: boolean; columns?: number }): Output & { text: () => string } {
  let text = ''
  return {
    json: false,
    isTTY: opts.tty,
    errorIsTTY: false,
    color: false,
    columns: opts.columns ?? 100,
    write: (t) => void (text += t),
    error: (t) => void (text += t),
    text: () => text,
  }
}

const long = 'A name far longer than any terminal column has room for, said at length'

describe('printTable', () => {
  const rows = [
    { id: randomUUID(), slug: 'nightly-report-for-the-european-entities', name: long, n: 3 },
    { id: randomUUID(), slug: 'digest', name: 'Digest', n: 12 },
  ]
  const columns = [
    { header: 'SLUG', value: (r: (typeof rows)[number]) => r.slug, id: true },
    { header: 'NAME', value: (r: (typeof rows)[number]) => r.name },
    { header: 'N', value: (r: (typeof rows)[number]) => r.n },
    { header: 'ID', value: (r: (typeof rows)[number]) => r.id },
  ]

  it('on a terminal keeps ids and slugs whole and cuts the name instead, at 60 columns too', () => {
    const out = captured({ tty: true, columns: 120 })
    printTable(out, rows, columns)
    const lines = out.text().trimEnd().split('\n')
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(120)
    expect(lines[1]).toContain(rows[0]!.id)
    expect(lines[1]).toContain(rows[0]!.slug)
    expect(lines[1]).toMatch(/A name far longer[^…]*…/)

    const narrow = captured({ tty: true, columns: 60 })
    printTable(narrow, rows, columns)
    // Too narrow even for the ids and the slug: the name goes down to ten characters, the ids stay
    // whole, and the terminal wraps the line.
    const [, first, second] = narrow.text().split('\n')
    expect(first).toBe(`nightly-report-for-the-european-entities  A name fa…  3   ${rows[0]!.id}`)
    expect(second).toBe(`digest                                    Digest      12  ${rows[1]!.id}`)
  })

  it('on a pipe prints every column whole', () => {
    const out = captured({ tty: false, columns: 60 })
    printTable(out, rows, columns)
    expect(out.text().split('\n')[1]).toBe(
      `nightly-report-for-the-european-entities  ${long}  3   ${rows[0]!.id}`,
    )
  })

  it('keeps one row to a line: line breaks and tabs in a value read as spaces', () => {
    const out = captured({ tty: false })
    printTable(
      out,
      [{ text: 'first\n  second\r\nthird\tfourth' }],
      [{ header: 'TEXT', value: (r) => r.text }],
    )
    expect(out.text()).toBe('TEXT\nfirst second third fourth\n')
  })
})

// Every list verb at 60 columns: a fake API answers each list with two records whose names are long,
// built from one record that carries every field the tables read.

const iso = new Date(Date.now() - 3600_000).toISOString()
const email = 'ada.lovelace@analytical-engines.example.com'

function record(): Record<string, unknown> {
  const id = randomUUID()
  return {
    id,
    slug: 'platform-reliability',
    name: long,
    title: long,
    summary: long,
    appName: long,
    subject: long,
    text: long,
    reason: long,
    email,
    from: email,
    current: false,
    enterprise: 'acme',
    role: 'owner',
    kind: 'deterministic',
    status: 'active',
    origin: 'api',
    layer: 'team',
    layerId: randomUUID(),
    provider: 'provider_a',
    plan: 'pay-as-you-go',
    keyHint: '…abcd',
    url: 'https://tools.example.com/mcp',
    mustGate: ['vcs.merge'],
    tool: 'vcs.merge_pull_request',
    target: 'https://hooks.example.com/very/long/path/that/goes/on',
    decision: 'dismissed',
    decidedBy: email,
    taskSlug: 'nightly-report',
    assigneeRole: 'ceo',
    taskId: randomUUID(),
    teamId: randomUUID(),
    memberId: randomUUID(),
    chatId: null,
    noteId: randomUUID(),
    correctionId: null,
    itemId: id,
    producedByRunId: randomUUID(),
    replayOf: null,
    response: { status: 200 },
    lastChars: 'abcd',
    scopes: ['tasks:read', 'runs:write', 'enterprise:read'],
    createdBy: { email },
    invitedBy: { email },
    approvedBy: { email },
    roles: [{ slug: 'ceo' }],
    teams: [{ slug: 'platform' }],
    members: [],
    items: [],
    tasks: [],
    evidence: [],
    changes: { goal: 'x' },
    lastRun: { taskSlug: 'nightly-report', status: 'succeeded' },
    note: { id: randomUUID(), text: long },
    correction: null,
    score: 0.5,
    ratingUp: 1,
    ratingDown: 0,
    recalls: 4,
    holderCount: 2,
    concurrentRunLimit: 3,
    versionNumber: 2,
    number: 2,
    runCount: 5,
    unread: 1,
    read: false,
    builtin: false,
    closed: false,
    definitionIssueCount: 0,
    provenance: 'service',
    createdAt: iso,
    updatedAt: iso,
    finishedAt: iso,
    lastSeenAt: iso,
    expiresAt: iso,
    joinedAt: iso,
    lastUsedAt: iso,
    approvedAt: iso,
    revokedAt: null,
    receivedAt: iso,
    decidedAt: iso,
    lastMessageAt: iso,
    lastAssignedAt: iso,
  }
}

/** The answer of every list route: two records, in the shape that route answers. */
function answer(req: Sent): { body: unknown } {
  const two = [record(), record()]
  const page = (key = 'data') => ({ [key]: two, page: 1, limit: 25, total: 2, pages: 1 })
  const path = req.path
  if (
    ['/tasks', '/runs', '/executions', '/webhooks', '/catalog/tasks', '/catalog/roles'].includes(
      path,
    )
  )
    return { body: page() }
  if (/^\/members\/[^/]+\/emails$/.test(path)) return { body: page() }
  if (path === '/memory') return { body: page('notes') }
  if (path === '/memory/review') return { body: page('items') }
  if (path === '/memory/review/history') return { body: page('decisions') }
  if (/^\/tasks\/[^/]+\/memory$/.test(path))
    return {
      body: { taskId: two[0]!.taskId, teamId: null, grants: { read: [], write: [] }, notes: two },
    }
  if (path === '/blockers')
    return {
      body: {
        failed: { data: two, page: 1, limit: 25, total: 2, pages: 1 },
        stoppedPipelines: [],
        blocked: two,
        paused: [],
        taskProblems: [],
      },
    }
  if (path === '/llm/tiers')
    return {
      body: {
        tiers: {
          provider_a: { fast: { model: 'provider-a-model-with-a-very-long-dated-name-20250929' } },
        },
      },
    }
  return { body: two }
}

const sessionTarget = { kind: 'session' as const, token: 'osds_x', tokenSource: 'profile' as const }
const task = randomUUID()
const member = randomUUID()

const verbs: [string, (deps: Deps) => Promise<void>][] = [
  ['auth sessions list', listSessions],
  ['enterprises list', listEnterprises],
  ['tokens list', (d) => listTokens(d, {})],
  ['users list', listUsers],
  ['users invites', listInvites],
  ['connections list', (d) => listAppConnections(d)],
  ['teams list', listTeams],
  ['members list', listMembers],
  ['members emails list', (d) => listEmails(d, member, {})],
  ['roles list', listRoles],
  ['tasks list', (d) => listTasks(d, {})],
  ['tasks versions', (d) => listVersions(d, task)],
  ['tasks memory list', (d) => taskMemory(d, task)],
  ['runs list', (d) => listRuns(d, {})],
  ['blockers list', (d) => listBlockers(d, {})],
  ['executions list', (d) => listExecutions(d, {})],
  ['webhooks list', (d) => listDeliveries(d, {})],
  ['gates list', (d) => listGates(d, {})],
  ['chats list', (d) => listChats(d, {})],
  ['tools bindings list', (d) => listToolConnections(d, {})],
  ['llm connections list', listLlmConnections],
  ['llm bindings list', (d) => listBindings(d, {})],
  ['plans list', (d) => listPlans(d, {})],
  ['memory list', (d) => listNotes(d, {})],
  ['memory review', (d) => listReview(d, {})],
  ['memory history', (d) => reviewHistory(d, {})],
  ['catalog tasks list', (d) => listEntries(d, {})],
  ['catalog roles list', (d) => listRoleEntries(d, {})],
  ['recommendations list', (d) => listRecommendations(d, {})],
]

describe('every list verb on a 60-column terminal', () => {
  it.each(verbs)('%s prints its ids whole and cuts the rest', async (_verb, list) => {
    const api = new FakeApi(answer)
    const f = fakeDeps(api, { tty: true, columns: 60, target: sessionTarget })
    await list(f.deps)
    const printed = f.stdout()
    expect(printed).not.toMatch(cutUuid)
    const ids = [...printed.matchAll(uuid)].map(([id]) => id)
    expect(ids.length).toBeGreaterThan(0)
    // The long names gave way where a table shows them; nothing of them is cut off on a pipe.
    if (printed.includes('A name')) expect(printed).toContain('…')
    const piped = fakeDeps(new FakeApi(answer), { columns: 60, target: sessionTarget })
    await list(piped.deps)
    expect(piped.stdout()).not.toContain('…abcd…')
    if (piped.stdout().includes('A name')) expect(piped.stdout()).toContain(long)
  })

  it('llm tiers list keeps the model whole: the model is what `llm tiers override` takes', async () => {
    const f = fakeDeps(new FakeApi(answer), { tty: true, columns: 40 })
    await listTiers(f.deps)
    expect(f.stdout().split('\n')[1]).toContain(
      'provider-a-model-with-a-very-long-dated-name-20250929',
    )
  })

  it('profile list keeps the profile name whole: the name is what `profile use` takes', async () => {
    const profiles = new ProfileStore(await mkdtemp(join(tmpdir(), 'osctl-tables-')))
    profiles.save(email, { url: `https://osd.${'very-long-host.'.repeat(4)}example.com/v1` })
    const f = fakeDeps(new FakeApi(answer), { tty: true, columns: 60, profiles })
    await listProfiles(f.deps)
    const row = f.stdout().split('\n')[1]!
    expect(row).toContain(email)
    expect(row).toContain('…')
  })
})

import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import {
  approveRecommendation,
  declineRecommendation,
  getRecommendation,
  listRecommendations,
} from '../../cli/commands/recommendations.js'
import { UsageError } from '../../cli/errors.js'
import { Recommendation, RecommendationDetail } from '../../shared/schemas/recommendations.js'
import { Run } from '../../shared/schemas/runs.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'
import { osctl, startCliDaemon } from '../helpers/osctl.js'

// osctl recommendations and osctl tasks improve / tasks recommendations. In process first (a client
// whose transport the test answers, output captured, colour on or off), then the whole of osctl, still
// in process, against a real daemon, its --json parsed by the shared schemas.

const now = () => new Date().toISOString()

function rec(overrides: Partial<Recommendation> = {}): Recommendation {
  return Recommendation.parse({
    id: randomUUID(),
    taskId: randomUUID(),
    taskSlug: 'invoices',
    status: 'waiting',
    baseVersionId: randomUUID(),
    changes: { skillMd: '# Invoices\nPut the PO number in the subject.\n' },
    rationale: 'Two runs failed for the missing PO number.',
    evidence: [{ runId: randomUUID(), why: 'no PO number' }],
    proposedByRunId: randomUUID(),
    createdAt: now(),
    decidedAt: null,
    decision: null,
    reason: null,
    decidedBy: null,
    versionId: null,
    runId: null,
    ...overrides,
  })
}

function detail(r: Recommendation): RecommendationDetail {
  return RecommendationDetail.parse({
    ...r,
    baseIsCurrent: true,
    baseVersionNumber: 3,
    fieldChanges: [
      { field: 'guardrails', before: [], after: ['Never without a PO number'] },
      {
        field: 'skillMd',
        before: '# Invoices\n',
        after: '# Invoices\nPut the PO number in the subject.\n',
      },
    ],
    skillDiff: [
      { kind: 'same', text: '# Invoices' },
      { kind: 'added', text: 'Put the PO number in the subject.' },
      { kind: 'same', text: '' },
    ],
  })
}

describe('in process', () => {
  it('get: the diff, coloured on a terminal, plain without colour', async () => {
    const r = rec()
    const api = new FakeApi(() => ({ body: detail(r) }))
    const plain = fakeDeps(api)
    await getRecommendation(plain.deps, r.id)
    expect(api.sent[0]).toMatchObject({ method: 'GET', path: `/recommendations/${r.id}` })
    const text = plain.stdout()
    expect(text).toContain('changes against version 3:')
    expect(text).toContain('guardrails:\n- []\n+ [\n+   "Never without a PO number"\n+ ]')
    expect(text).toContain('skillMd:\n  # Invoices\n+ Put the PO number in the subject.\n')
    expect(text).not.toContain('\x1b[')
    const coloured = fakeDeps(api, { color: true })
    await getRecommendation(coloured.deps, r.id)
    expect(coloured.stdout()).toContain('\x1b[32m+ Put the PO number in the subject.\x1b[39m')
    expect(coloured.stdout()).toContain('\x1b[31m- []\x1b[39m')
  })

  it('list, approve and decline send what the API takes', async () => {
    const r = rec()
    const api = new FakeApi((req) =>
      req.method === 'GET' ? { body: [r] } : { status: 201, body: { ...r, status: 'approved' } },
    )
    const { deps, stdout } = fakeDeps(api)
    await listRecommendations(deps, { decided: true })
    expect(api.sent[0]).toMatchObject({ path: '/recommendations', query: { view: 'decided' } })
    expect(stdout()).toContain('invoices')
    await approveRecommendation(deps, r.id, { idempotencyKey: 'k1' })
    expect(api.sent[1]).toMatchObject({
      method: 'POST',
      path: `/recommendations/${r.id}/decision`,
      body: { decision: 'approve', idempotencyKey: 'k1' },
    })
    await declineRecommendation(deps, r.id, { reason: 'not now' })
    expect(api.sent[2]!.body).toEqual({ decision: 'decline', reason: 'not now' })
    await expect(declineRecommendation(deps, r.id, { reason: '  ' })).rejects.toBeInstanceOf(
      UsageError,
    )
    await expect(
      approveRecommendation(deps, r.id, { idempotencyKey: 'k'.repeat(81) }),
    ).rejects.toBeInstanceOf(UsageError)
    await expect(approveRecommendation(deps, 'nope', {})).rejects.toBeInstanceOf(UsageError)
    expect(api.sent).toHaveLength(3)
  })
})

describe('against a daemon', () => {
  it('tasks improve starts an os-improve run; recommendations list, get, approve, decline', async () => {
    const cli = await startCliDaemon('Recs Cli', { OSD_IMPROVE_INTERVAL_MINUTES: 'off' })
    const task = await cli.json(['tasks', 'create', '--name', 'Invoices', '--role', 'ceo'])
    const run = Run.parse(await cli.json(['tasks', 'improve', task.slug]))
    expect(run).toMatchObject({ taskSlug: 'os-improve', input: { taskId: task.id }, origin: 'api' })

    // Two proposals as os.propose_change stores them.
    const insert = async (goal: string) => {
      const [row] = await cli.db.sql<{ id: string }[]>`
        insert into recommendations (enterprise_id, task_id, task_slug, base_version_id, changes, rationale)
        values (${cli.enterprise.id}, ${task.id}, ${task.slug}, ${task.currentVersionId},
                ${cli.db.sql.json({ goal })}, 'Runs show the goal is unclear.')
        returning id`
      return row!.id
    }
    const first = await insert('Send the invoice with its PO number')
    const listed = (await cli.json(['recommendations', 'list'])).map((r: unknown) =>
      Recommendation.parse(r),
    )
    expect(listed.map((r: Recommendation) => r.id)).toEqual([first])
    const got = RecommendationDetail.parse(await cli.json(['recommendations', 'get', first]))
    expect(got.fieldChanges).toEqual([
      { field: 'goal', before: '', after: 'Send the invoice with its PO number' },
    ])
    const shown = await osctl(['recommendations', 'get', first], cli.env)
    expect(shown.exitCode, shown.stderr).toBe(0)
    expect(shown.stdout).toContain('+ "Send the invoice with its PO number"')

    const declined = Recommendation.parse(
      await cli.json(['recommendations', 'decline', first, '--reason', 'not yet']),
    )
    expect(declined).toMatchObject({ status: 'declined', reason: 'not yet' })
    const again = await osctl(['recommendations', 'approve', first], cli.env)
    expect(again.exitCode).toBe(1)
    expect(again.stderr).toContain('already_decided')

    const second = await insert('Send the invoice, PO number in the subject')
    const approved = Recommendation.parse(
      await cli.json(['recommendations', 'approve', second, '--idempotency-key', 'once']),
    )
    expect(approved.status).toBe('approved')
    expect(approved.versionId).not.toBeNull()
    expect(approved.runId).not.toBeNull()
    const ofTask = await cli.json(['tasks', 'recommendations', task.slug])
    expect(ofTask.map((r: Recommendation) => r.id)).toEqual([second, first])
    const decided = await cli.json(['recommendations', 'list', '--decided', '--task', task.slug])
    expect(decided).toHaveLength(2)
  }, 60_000)
})

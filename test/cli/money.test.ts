import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { closeExecution } from '../../cli/commands/executions.js'
import { connectionUsage, listPrices, setPrice } from '../../cli/commands/llm.js'
import { getRun, listSteps } from '../../cli/commands/runs.js'
import { showSpendToday } from '../../cli/commands/spend.js'
import { getVersion } from '../../cli/commands/tasks.js'
import { cost, usd, usdFromDollars } from '../../cli/money.js'
import { Execution } from '../../shared/schemas/executions.js'
import { RunSteps } from '../../shared/schemas/forks.js'
import { LlmPrice, LlmPrices, LlmUsage } from '../../shared/schemas/models.js'
import { Run } from '../../shared/schemas/runs.js'
import { SpendView } from '../../shared/schemas/spend.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'

// Money in one format in osctl's human output (issue 51 item 10): every cost, spend, cap and price,
// in tables, details and event lines, as cli/money.ts writes it ("$0.0295"); --json unchanged. The
// answers are the daemon's shapes, held to the shared schemas so they cannot drift from the wire.

const at = '2026-11-22T09:30:00.000Z'
const runId = randomUUID()
const taskId = randomUUID()

describe('usd', () => {
  it('writes dollars, to four places where a fraction of a cent is held', () => {
    expect(usd(2.95)).toBe('$0.0295')
    expect(usd(3)).toBe('$0.03')
    expect(usd(2500)).toBe('$25.00')
    expect(usd(0)).toBe('$0.00')
    expect(usd(123456.78)).toBe('$1234.5678')
  })

  it('never reads a small spend as nothing, nor gains a fraction from floating point', () => {
    expect(usd(0.0001)).toBe('<$0.0001') // one millionth of a dollar
    expect(usd(0.01)).toBe('$0.0001')
    expect(usdFromDollars(0.15)).toBe('$0.15') // 0.15 * 100 is 15.000000000000002
    expect(usdFromDollars(0.075)).toBe('$0.0750')
    expect(usdFromDollars(3)).toBe('$3.00')
  })

  it('says unpriced where model calls had no price', () => {
    expect(cost(0, true)).toBe('unpriced')
    expect(cost(0.2, true)).toBe('$0.0020 + unpriced')
    expect(cost(0.2, false)).toBe('$0.0020')
  })
})

const run = Run.parse({
  id: runId,
  taskId,
  taskVersionId: randomUUID(),
  taskSlug: 'nightly-report',
  status: 'succeeded',
  input: {},
  result: null,
  reason: null,
  memberId: null,
  executionId: randomUUID(),
  previousRunId: null,
  origin: 'api',
  traceId: null,
  costUsdCents: 2.95,
  costUnpriced: false,
  createdAt: at,
  updatedAt: at,
  startedAt: at,
  finishedAt: at,
})

describe('every place osctl prints money', () => {
  it('runs get: the cost, and the cost of each model call on its event lines', async () => {
    // The fields the detail view reads (the rest of RunDetail is not printed here).
    const detail = {
      run,
      events: [
        {
          id: randomUUID(),
          type: 'model.called',
          createdAt: at,
          payload: { model: 'claude-sonnet-5-5', outputTokens: 120, costUsdCents: 2.95 },
        },
      ],
      gates: [],
      next: [],
      previous: null,
      cost: { usdCents: 2.95, unpriced: false },
    }
    const f = fakeDeps(new FakeApi(() => ({ body: detail })))
    await getRun(f.deps, runId, {})
    expect(f.stdout()).toMatch(/^cost\s+\$0\.0295$/m)
    expect(f.stdout()).toMatch(
      /model\.called\s+model=claude-sonnet-5-5 outputTokens=120 cost=\$0\.0295$/m,
    )
    expect(f.stdout()).not.toContain('US cents')

    const json = fakeDeps(new FakeApi(() => ({ body: detail })), { json: true })
    await getRun(json.deps, runId, {})
    expect(JSON.parse(json.stdout())).toEqual(detail)
  })

  it('runs steps, executions, spend and a connection usage', async () => {
    const steps = RunSteps.parse({
      runId,
      steps: [
        {
          step: 1,
          kind: 'model',
          name: 'claude-sonnet-5-5',
          status: 'done',
          isError: false,
          toolCalls: [],
          costUsdCents: 1.2345,
          startedAt: at,
          finishedAt: at,
          forkable: true,
          copied: false,
          gate: null,
        },
      ],
    })
    const s = fakeDeps(new FakeApi(() => ({ body: steps })))
    await listSteps(s.deps, runId)
    expect(s.stdout()).toMatch(/\s\$0\.0123\s/)

    const execution = Execution.parse({
      id: randomUUID(),
      status: 'complete',
      closed: true,
      closedAt: at,
      startedAt: at,
      updatedAt: at,
      runCount: 2,
      costUsdCents: 40.5,
      taskId,
      taskSlug: 'nightly-report',
      lastRun: {
        id: runId,
        status: 'succeeded',
        taskSlug: 'nightly-report',
        taskId,
        createdAt: at,
      },
      teamIds: [],
      memberIds: [],
    })
    const e = fakeDeps(new FakeApi(() => ({ body: execution })))
    await closeExecution(e.deps, execution.id)
    expect(e.stdout()).toMatch(/^cost\s+\$0\.4050$/m)

    const layer = randomUUID()
    const spend = SpendView.parse({
      day: '2026-11-22',
      enabled: true,
      today: [{ layer: 'team', layerId: layer, usdCents: 12.5, runs: 3, unpriced: false }],
      caps: [{ layer: 'team', layerId: layer, moneyCentsDay: 2500 }],
    })
    const p = fakeDeps(new FakeApi(() => ({ body: spend })))
    await showSpendToday(p.deps)
    expect(p.stdout()).toMatch(new RegExp(`^team\\s+${layer}\\s+\\$0\\.1250\\s+3$`, 'm'))
    expect(p.stdout()).toMatch(
      new RegExp(`^team\\s+${layer}\\s+\\$25\\.00/day\\s+\\$0\\.1250$`, 'm'),
    )

    const usage = LlmUsage.parse({
      connectionId: randomUUID(),
      days: [
        {
          day: '2026-11-22',
          model: 'claude-sonnet-5-5',
          calls: 2,
          inputTokens: 1200,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          outputTokens: 300,
          costUsdCents: 0.81,
          unpriced: false,
        },
      ],
    })
    const u = fakeDeps(new FakeApi(() => ({ body: usage })))
    await connectionUsage(u.deps, usage.connectionId)
    expect(u.stdout()).toMatch(/\s\$0\.0081$/m)
  })

  it('llm prices: the list and a price set, per million tokens', async () => {
    const prices = LlmPrices.parse({
      prices: [
        {
          model: 'gpt-5.4-nano',
          source: 'list',
          provider: 'provider_b',
          input: 0.1,
          output: 0.4,
          cacheRead: 0.01,
          cacheWrite: null,
          updatedAt: at,
        },
        {
          model: 'llama3.2',
          source: 'enterprise',
          provider: null,
          input: 0.075,
          output: 3,
          cacheRead: null,
          cacheWrite: null,
          updatedAt: at,
        },
      ],
      unlisted: [
        {
          provider: 'provider_b',
          pricedAs: 'unpriced',
          frontierModel: 'gpt-5.6-sol',
          baseUrlSetByOperator: true,
        },
      ],
    })
    const l = fakeDeps(new FakeApi(() => ({ body: prices })))
    await listPrices(l.deps)
    expect(l.stdout()).toMatch(
      /^gpt-5\.4-nano\s+list \(provider_b\)\s+\$0\.10\s+\$0\.40\s+\$0\.01\s+-$/m,
    )
    expect(l.stdout()).toMatch(/^llama3\.2\s+enterprise\s+\$0\.0750\s+\$3\.00\s+-\s+-$/m)
    expect(l.stdout()).toContain('unpriced, at $0.00 (the operator set its address)')

    const price = LlmPrice.parse(prices.prices[1])
    const s = fakeDeps(new FakeApi(() => ({ body: price })))
    await setPrice(s.deps, { model: 'llama3.2', input: '0.075', output: '3' })
    expect(s.stdout()).toBe(
      'llama3.2: $0.0750 input, $3.00 output per million tokens, from its next call\n',
    )
  })

  it("a task version's spend limit", async () => {
    // The fields a version's view reads.
    const version = {
      id: randomUUID(),
      taskId,
      number: 2,
      message: null,
      createdAt: at,
      definition: {
        goal: 'Report.',
        spend: { moneyUsdPerRun: 2, maxModelTier: 'mid' },
      },
      skillMd: '# Report',
      runCount: 0,
      current: true,
    }
    const f = fakeDeps(new FakeApi(() => ({ body: version })))
    await getVersion(f.deps, taskId, version.id)
    expect(f.stdout()).toMatch(/^spend\s+\$2\.00 a run at most, maxModelTier mid$/m)
  })
})

import { randomUUID } from 'node:crypto'
import { mkdtemp, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { startRun, waitRun } from '../../cli/commands/runs.js'
import { CliError, exitCodes } from '../../cli/errors.js'
import { escapeData, escapeProperty, markdownCell } from '../../cli/github.js'
import { report } from '../../cli/report.js'
import type { Run, RunEvent, RunStatus } from '../../shared/schemas/runs.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'

// `runs start --wait` and `runs wait` in a GitHub Actions step (issue 51 item 6), in process: an
// `::error::` line for a run that did not succeed, a summary on the step's page, and nothing of a
// run's text (a model's reason or output) able to start a workflow command of its own.

const runId = randomUUID()
const started = '2026-11-22T09:30:00.000Z'

function run(status: RunStatus, overrides: Partial<Run> = {}): Run {
  return {
    id: runId,
    status,
    input: {},
    costUsdCents: 2.95,
    costUnpriced: false,
    startedAt: started,
    finishedAt: status === 'running' ? null : '2026-11-22T09:30:12.000Z',
    taskId: randomUUID(),
    taskVersionId: randomUUID(),
    taskSlug: 'nightly-report',
    memberId: null,
    executionId: randomUUID(),
    previousRunId: null,
    origin: 'api',
    result: null,
    reason: null,
    traceId: null,
    createdAt: started,
    updatedAt: started,
    ...overrides,
  }
}

const event = (type: string, payload: Record<string, unknown> = {}): RunEvent => ({
  id: randomUUID(),
  type,
  payload,
  createdAt: started,
})

/** The wait of `command` on a daemon whose run reads answer `last`; what it printed, its exit code. */
async function waitOn(
  command: 'start' | 'wait',
  last: Run,
  events: RunEvent[] = [],
  timeout?: string,
) {
  const api = new FakeApi((req) =>
    req.method === 'POST'
      ? { status: 201, body: run('pending') }
      : { body: { run: last, events, gates: [], next: [], previous: null } },
  )
  const f = fakeDeps(api)
  let stderr = ''
  let code: number = exitCodes.ok
  const action =
    command === 'start'
      ? startRun(f.deps, last.taskId, { wait: true, timeout })
      : waitRun(f.deps, runId, { timeout })
  await action.catch((err: unknown) => {
    expect(err).toBeInstanceOf(CliError)
    code = report(err, false, {
      stdout: { write: () => undefined },
      stderr: { write: (s: string) => (stderr += s) },
    })
  })
  return { code, stdout: f.stdout(), stderr: f.stderr() + stderr }
}

let summary: string

beforeEach(async () => {
  summary = join(await mkdtemp(join(tmpdir(), 'osctl-gha-')), 'summary.md')
  await writeFile(summary, '# earlier steps\n')
  vi.stubEnv('GITHUB_ACTIONS', 'true')
  vi.stubEnv('GITHUB_STEP_SUMMARY', summary)
})
afterEach(() => vi.unstubAllEnvs())

describe('osctl under GitHub Actions', () => {
  it('marks a failed run with ::error:: on stderr and appends its summary to the step', async () => {
    const res = await waitOn('start', run('failed', { reason: 'the model refused: 50% over cap' }))
    expect(res.code).toBe(exitCodes.failed)
    expect(res.stderr.split('\n')).toContain(
      `::error title=osctl%3A run of nightly-report failed::run ${runId} of nightly-report failed: the model refused: 50%25 over cap`,
    )
    expect(JSON.parse(res.stdout)).toMatchObject({ id: runId, status: 'failed' })
    expect(await readFile(summary, 'utf8')).toBe(
      [
        '# earlier steps',
        '### osctl: run of nightly\\-report failed',
        '',
        '| | |',
        '| --- | --- |',
        `| run | ${markdownCell(runId)} |`,
        '| task | nightly\\-report |',
        '| status | failed |',
        '| cost | $0\\.0295 |',
        '| duration | 12\\.0s |',
        '| reason | the model refused: 50% over cap |',
        '',
        '',
      ].join('\n'),
    )
  })

  it('adds no ::error:: for a run that succeeded, but its summary; a timeout is an error (exit 8)', async () => {
    const ok = await waitOn('wait', run('succeeded'))
    expect(ok.code).toBe(exitCodes.ok)
    expect(ok.stderr).not.toContain('::')
    expect(await readFile(summary, 'utf8')).toContain('| status | succeeded |')

    const pending = await waitOn('wait', run('running'), [event('run.running')], '0')
    expect(pending.code).toBe(exitCodes.pending)
    expect(pending.stderr).toContain(
      `::error title=osctl%3A run of nightly-report still pending::run ${runId} of nightly-report is still running after 0s\n`,
    )
    expect(await readFile(summary, 'utf8')).toContain('| duration | ')
  })

  it("lets nothing of a run's text start a workflow command: newlines, ::, ##[ and % escaped", async () => {
    const hostile = 'done\n::add-mask::x\r\n##[error]fake\n::stop-commands::t %0A::warning::y'
    const res = await waitOn(
      'start',
      run('failed', {
        reason: hostile,
        result: { outcome: 'sent', summary: hostile, output: { note: hostile } },
      }),
      [event('run.failed', { reason: hostile })],
    )
    expect(res.code).toBe(exitCodes.failed)
    const lines = [...res.stdout.split('\n'), ...res.stderr.split('\n')]
    const commands = lines.filter((line) => /^\s*(::|##\[)/.test(line))
    expect(commands).toEqual([
      `::error title=osctl%3A run of nightly-report failed::run ${runId} of nightly-report failed: ` +
        'done%0A::add-mask::x%0D%0A##[error]fake%0A::stop-commands::t %250A::warning::y',
    ])
    const page = await readFile(summary, 'utf8')
    expect(page).not.toMatch(/^\s*(::|##\[)/m)
    expect(page).toContain(
      '| reason | done ::add\\-mask::x \\#\\#\\[error\\]fake ::stop\\-commands::t %0A::warning::y |',
    )
  })

  it('escapes data and properties as the runner unescapes them, and markdown cells', () => {
    expect(escapeData('50%\r\n::x')).toBe('50%25%0D%0A::x')
    expect(escapeProperty('a: b, c')).toBe('a%3A b%2C c')
    expect(markdownCell('a|b <img src=x> `c` [d](e)\nf')).toBe(
      'a\\|b &lt;img src=x&gt; \\`c\\` \\[d\\]\\(e\\) f',
    )
  })

  it('does nothing of this outside GitHub Actions', async () => {
    vi.stubEnv('GITHUB_ACTIONS', '')
    const res = await waitOn('start', run('failed', { reason: 'broken' }))
    expect(res.code).toBe(exitCodes.failed)
    expect(res.stderr).not.toContain('::error')
    expect(await readFile(summary, 'utf8')).toBe('# earlier steps\n')
  })
})

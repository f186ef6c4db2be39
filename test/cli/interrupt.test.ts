import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { RequestOptions } from '../../cli/client.js'
import { startRun, waitRun, watchRun } from '../../cli/commands/runs.js'
import { bulkRuns } from '../../cli/commands/runs-bulk.js'
import { waitRun as waitForRun } from '../../cli/commands/wait.js'
import type { Deps } from '../../cli/deps.js'
import { makeDeps } from '../../cli/deps.js'
import { report } from '../../cli/report.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'
import { waitFor } from '../helpers/wait.js'

// Ctrl+C while osctl follows a run (issue 51 item 16), or a bulk operation (issue 50): either goes
// on in osd, so osctl stops following, says so on stderr with the command that follows it again,
// and exits 130. In process: Ctrl+C reaches a follow through deps.onInterrupt, which the fake deps
// press.

const taskId = randomUUID()
const runId = randomUUID()
const run = {
  id: runId,
  taskId,
  taskSlug: 'nightly-report',
  status: 'running',
  reason: null,
  createdAt: '2026-11-22T09:30:00.000Z',
}
const event = {
  id: 'e1',
  type: 'run.running',
  payload: {},
  createdAt: '2026-11-22T09:30:00.000Z',
}

/** A daemon whose long-poll holds until the request is ended, as osd's does for a run that runs. */
class HoldingApi extends FakeApi {
  held = 0
  ended = 0
  constructor() {
    super((req) => {
      if (req.method === 'POST') return { status: 201, body: { ...run, status: 'pending' } }
      if (req.path === `/tasks/${taskId}`) return { body: { id: taskId, slug: 'nightly-report' } }
      return { body: { run, events: [event], gates: [], next: [], previous: null } }
    })
  }
  override async raw(method: string, path: string, options: RequestOptions = {}) {
    if (!options.query?.waitSeconds) return super.raw(method, path, options)
    this.held++
    return new Promise<never>((_, reject) => {
      options.signal?.addEventListener('abort', () => {
        this.ended++
        reject(Object.assign(new Error('This operation was aborted'), { name: 'AbortError' }))
      })
    })
  }
}

const follows: [string, (deps: Deps) => Promise<void>][] = [
  ['runs start --wait', (deps) => startRun(deps, taskId, { wait: true })],
  ['runs wait', (deps) => waitRun(deps, runId, {})],
  ['runs watch', (deps) => watchRun(deps, runId)],
  ['wait run', (deps) => waitForRun(deps, runId, { for: 'succeeded' })],
]

describe('Ctrl+C while following a run', () => {
  it.each(follows)(
    '%s says the run goes on and how to follow it, and exits 130',
    async (_, command) => {
      const api = new HoldingApi()
      const f = fakeDeps(api, { errorTty: true })
      const following = command(f.deps).catch((err: unknown) => err)
      await waitFor(() => expect(api.held).toBe(1))
      f.interrupt()
      const err = await following
      let stderr = ''
      let stdout = ''
      const code = report(err, false, {
        stdout: { write: (t: string) => (stdout += t) },
        stderr: { write: (t: string) => (stderr += t) },
      })
      expect(code).toBe(130)
      expect(stderr).toBe(
        `error: stopped following run ${runId}: the run goes on in osd\n` +
          `hint: follow it again with: osctl runs watch ${runId}\n`,
      )
      expect(stdout).toBe('')
      // The long-poll ended with it (nothing holds the process open), the run was not cancelled,
      // and Ctrl+C is the shell's again.
      expect(api.ended).toBe(1)
      expect(api.sent.filter((s) => s.path.endsWith('/cancel'))).toEqual([])
      expect(f.interruptListeners()).toBe(0)
      // The spinner's line is cleared: the last thing on stderr is not a spinner frame.
      expect(f.stderr()).not.toMatch(/⠋[^\n]*$/)
    },
  )

  it('with --json, says it as JSON on stdout too', async () => {
    const api = new HoldingApi()
    const f = fakeDeps(api, { json: true })
    const following = watchRun(f.deps, runId).catch((err: unknown) => err)
    await waitFor(() => expect(api.held).toBe(1))
    f.interrupt()
    let stdout = ''
    const code = report(await following, true, {
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: () => undefined },
    })
    expect(code).toBe(130)
    expect(JSON.parse(stdout)).toEqual({
      error: 'interrupted',
      message: `stopped following run ${runId}: the run goes on in osd`,
      hint: `follow it again with: osctl runs watch ${runId}`,
      exitCode: 130,
    })
  })

  it("osctl's own deps hear Ctrl+C as SIGINT while a follow listens, and leave it afterwards", () => {
    const before = process.listeners('SIGINT')
    let heard = 0
    const stop = makeDeps({}).onInterrupt(() => heard++)
    const added = process.listeners('SIGINT').filter((l) => !before.includes(l))
    expect(added).toHaveLength(1)
    added[0]!('SIGINT')
    expect(heard).toBe(1)
    stop()
    expect(process.listeners('SIGINT')).toEqual(before)
  })

  it('a bulk operation: says it goes on in osd and how to read it again, exits 130', async () => {
    const opId = randomUUID()
    const op = {
      id: opId,
      action: 'cancel',
      filter: { status: 'pending' },
      status: 'running',
      matched: 3000,
      done: 250,
      failed: 0,
      skipped: 0,
      createdBy: 'token:x',
      reason: null,
      createdAt: '2026-11-22T09:30:00.000Z',
      finishedAt: null,
    }
    let reads = 0
    const api = new FakeApi((req) => {
      if (req.method === 'POST' && (req.body as { dryRun?: boolean }).dryRun)
        return {
          body: { dryRun: true, action: 'cancel', filter: {}, matched: 3000, maxRuns: 100_000 },
        }
      if (req.method === 'POST') return { status: 202, body: op }
      // Done after a few reads: without Ctrl+C heard, the command would end there.
      return { body: ++reads < 3 ? op : { ...op, status: 'completed', done: 3000 } }
    })
    const f = fakeDeps(api, { errorTty: true })
    const following = bulkRuns(f.deps, 'cancel', { status: 'pending', yes: true }).catch(
      (err: unknown) => err,
    )
    await waitFor(() => expect(reads).toBeGreaterThan(0))
    f.interrupt()
    let stderr = ''
    const code = report(await following, false, {
      stdout: { write: () => undefined },
      stderr: { write: (t: string) => (stderr += t) },
    })
    expect(code).toBe(130)
    expect(stderr).toBe(
      `error: stopped following bulk operation ${opId}: it goes on in osd\n` +
        `hint: read it again with: osctl api GET /runs/bulk/${opId}\n`,
    )
    // Nothing more is read once stopped, and Ctrl+C is the shell's again.
    const readsThen = reads
    await new Promise((resolve) => setTimeout(resolve, 700))
    expect(reads).toBe(readsThen)
    expect(f.interruptListeners()).toBe(0)
  })
})

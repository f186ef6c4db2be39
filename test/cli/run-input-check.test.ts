import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { startRun } from '../../cli/commands/runs.js'
import { CliError, exitCodes } from '../../cli/errors.js'
import { report } from '../../cli/report.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'

// `osctl runs start` checks the input against the task's declared inputs before it sends it (issue 51
// item 5), in process on a fake daemon: what it refuses (exit 2, naming the input and listing the
// declared ones), what it sends, and that --no-input-check sends as it is. The API's own rule (the body
// is the input as sent) is unchanged; a real daemon's task read is in test/cli/tasks-runs.test.ts.

const taskId = randomUUID()
const declared = [
  { key: 'region', label: 'Region', type: 'string', required: true },
  { key: 'days', label: 'Days', type: 'number' },
]

/** A daemon with one task declaring `inputs`, reached by slug or id; a start answers 201. */
function daemon(inputs: unknown, taskStatus = 200) {
  return new FakeApi((req) => {
    if (req.method === 'GET' && req.path === '/tasks')
      return { body: { data: [{ id: taskId, slug: 'nightly-report' }], nextCursor: null } }
    if (req.method === 'GET' && req.path === `/tasks/${taskId}`)
      return taskStatus === 200
        ? {
            body: {
              id: taskId,
              slug: 'nightly-report',
              currentVersion: { definition: { inputs } },
            },
          }
        : {
            status: taskStatus,
            body: { error: 'api_token_scope', message: 'This route needs tasks:read.' },
          }
    if (req.method === 'POST') return { status: 201, body: { id: randomUUID(), input: req.body } }
    return { status: 404, body: { error: 'not_found', message: req.path } }
  })
}

/**
 * `runs start --json` as a command line ends: its exit code, stdout (the run, or the error's JSON),
 * stderr, and the starts it sent.
 */
async function start(api: FakeApi, opts: Parameters<typeof startRun>[2]) {
  const flags = { json: true }
  const f = fakeDeps(api, flags)
  let stdout = ''
  let stderr = ''
  let code: number = exitCodes.ok
  await startRun(f.deps, 'nightly-report', opts).catch((err: unknown) => {
    expect(err).toBeInstanceOf(CliError)
    code = report(err, Boolean(flags.json), {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
    })
  })
  const posts = api.sent.filter((r) => r.method === 'POST')
  return { code, stdout: f.stdout() + stdout, stderr: f.stderr() + stderr, posts }
}

describe('runs start checks the input against the declared inputs', () => {
  it('refuses a missing required input with exit 2, naming it and the declared inputs', async () => {
    const res = await start(daemon(declared), { input: ['days=7'] })
    expect(res.code).toBe(exitCodes.usage)
    expect(res.posts).toEqual([])
    expect(res.stderr).toContain(
      'error: task nightly-report: missing required input "region"; ' +
        'it declares region (string, required), days (number, optional)\n',
    )
    expect(res.stderr).toContain('--no-input-check')
  })

  it('counts a blank value as missing, as a run would start without it', async () => {
    const res = await start(daemon(declared), { input: ['region= '] })
    expect(res.code).toBe(exitCodes.usage)
    expect(res.stderr).toContain('missing required input "region"')
  })

  it('refuses an unknown key, with "did you mean" the declared key it is close to', async () => {
    const res = await start(daemon(declared), { input: ['region=eu', 'dasy=7', 'colour=red'] })
    expect(res.code).toBe(exitCodes.usage)
    expect(res.posts).toEqual([])
    expect(res.stderr).toContain('unknown input "dasy" (did you mean "days"?)')
    // Nothing close: no suggestion, the declared inputs listed all the same.
    expect(res.stderr).toMatch(/unknown input "colour"; it declares region/)
  })

  it('with --json the refusal is one JSON document on stdout, exit 2, nothing sent', async () => {
    const res = await start(daemon(declared), { input: ['regoin=eu'] })
    expect(res.code).toBe(exitCodes.usage)
    expect(res.posts).toEqual([])
    const body = JSON.parse(res.stdout)
    expect(body).toMatchObject({ error: 'usage', exitCode: 2 })
    expect(body.message).toContain('missing required input "region"')
    expect(body.message).toContain('unknown input "regoin" (did you mean "region"?)')
    expect(body.hint).toContain('--no-input-check')
  })

  it('checks -d and --input as merged: a pair can give what the JSON lacks', async () => {
    const api = daemon(declared)
    const missing = await start(api, { data: '{"days":7}', input: ['dyas=1'] })
    expect(missing.code).toBe(exitCodes.usage)
    expect(missing.stderr).toContain('missing required input "region"')
    expect(missing.stderr).toContain('unknown input "dyas" (did you mean "days"?)')

    const merged = await start(daemon(declared), { data: '{"days":7}', input: ['region=eu'] })
    expect(merged.code).toBe(exitCodes.ok)
    expect(merged.posts.map((p) => p.body)).toEqual([{ days: 7, region: 'eu' }])
    // A pair that blanks what the JSON gave is missing: the merged input is what would be sent.
    const blanked = await start(daemon(declared), { data: '{"region":"eu"}', input: ['region='] })
    expect(blanked.code).toBe(exitCodes.usage)
  })

  it('sends an input that gives every required one and only declared keys', async () => {
    const res = await start(daemon(declared), { input: ['region=eu'] })
    expect(res.code).toBe(exitCodes.ok)
    expect(res.posts).toEqual([
      expect.objectContaining({ path: `/tasks/${taskId}/runs`, body: { region: 'eu' } }),
    ])
  })

  it('--no-input-check sends the input as it is, without reading the task', async () => {
    const api = daemon(declared)
    const res = await start(api, { input: ['colour=red'], inputCheck: false })
    expect(res.code).toBe(exitCodes.ok)
    expect(res.posts.map((p) => p.body)).toEqual([{ colour: 'red' }])
    expect(api.sent.some((r) => r.path === `/tasks/${taskId}`)).toBe(false)
  })

  it('a task that declares no inputs takes any input', async () => {
    for (const inputs of [null, []]) {
      const res = await start(daemon(inputs), { input: ['anything=1'], data: '{"x":[1]}' })
      expect(res.code).toBe(exitCodes.ok)
      expect(res.posts.map((p) => p.body)).toEqual([{ x: [1], anything: 1 }])
    }
  })

  it('sends as it is when the token may start runs but not read the task (403)', async () => {
    const res = await start(daemon(declared, 403), { input: ['colour=red'] })
    expect(res.code).toBe(exitCodes.ok)
    expect(res.posts.map((p) => p.body)).toEqual([{ colour: 'red' }])
  })
})

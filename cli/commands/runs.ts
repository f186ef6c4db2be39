import { Option, type Command } from 'commander'
import { runSorts, runStatuses } from '../../shared/values.js'
import type { OsToolView, Run, RunDetail, RunEvent, RunStatus } from '../../shared/schemas/runs.js'
import type { RunStep, RunSteps } from '../../shared/schemas/forks.js'
import type { VersionDefinition } from '../../shared/schemas/tasks.js'
import { modelTiers } from '../../shared/values.js'
import type { ApiClient } from '../client.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { ApiRequestError, UsageError, afterAnswer, exitCodes } from '../errors.js'
import { formatEvent } from '../events.js'
import { followRun, interruptible, waitExitCode, type FollowResult } from '../follow.js'
import { checkRunInput, collect, readInput } from '../inputs.js'
import {
  colour,
  printFields,
  printJson,
  printTable,
  show,
  type Output,
  type Styled,
} from '../output.js'
import { printPaged, withPageOptions, type PageFlags } from '../paging.js'
import { cost } from '../money.js'
import { resolveId, taskId } from '../resolve.js'
import { safeText } from '../safe-text.js'
import { duration, startSpinner } from '../spinner.js'
import { reportToGithub } from '../github.js'
import { about } from './about.js'
import { bulkRuns, hasFilter, type BulkFlags } from './runs-bulk.js'
import { wellFormedTraceParent } from '../../shared/trace-context.js'

export function statusText(out: Output, status: RunStatus): Styled {
  if (status === 'succeeded') return colour(out, 'green', status)
  if (status === 'failed') return colour(out, 'red', status)
  if (status === 'cancelled' || status === 'skipped_overlap') return colour(out, 'dim', status)
  return colour(out, 'yellow', status)
}

function columns(out: Output) {
  return [
    { header: 'ID', value: (r: Run) => r.id },
    { header: 'TASK', value: (r: Run) => r.taskSlug },
    { header: 'STATUS', value: (r: Run) => statusText(out, r.status) },
    { header: 'ORIGIN', value: (r: Run) => r.origin },
    // Why a run waits (issue 50): its task or the enterprise is paused.
    { header: 'WAITS', value: (r: Run) => (r.paused ? pausedWhy(r.paused) : ''), whenAny: true },
    { header: 'CREATED', value: (r: Run) => r.createdAt },
    { header: 'FINISHED', value: (r: Run) => r.finishedAt },
  ]
}

function runFields(out: Output, run: Run): [string, unknown][] {
  return [
    ['id', run.id],
    ['task', run.taskSlug],
    ['status', statusText(out, run.status)],
    ['origin', run.origin],
    ['input', run.input],
    ['result', run.result],
    ['reason', run.reason ?? run.blockedReason],
    ...(run.paused ? [['waits', pausedWhy(run.paused)] as [string, unknown]] : []),
    ['member', run.memberId],
    ['execution', run.executionId],
    ['forked from', run.forkedFrom && `${run.forkedFrom.runId} at step ${run.forkedFrom.step}`],
    ['created', run.createdAt],
    ['started', run.startedAt],
    ['finished', run.finishedAt],
    ['cost', cost(run.costUsdCents, run.costUnpriced)],
  ]
}

/** The detail views' line for an archived run, chat or execution (issue 46). */
export const archivedText = 'yes: read back from the archive; in no list, and not to fork or retry'

/** Why a paused run waits, in a few words: what is paused and why. */
export function pausedWhy(pause: NonNullable<Run['paused']>): string {
  return `${pause.scope} paused: ${safeText(pause.reason)}`
}

function showRun(deps: Deps, run: Run): void {
  show(deps.out, run, () => printFields(deps.out, runFields(deps.out, run)))
}

/** Seconds from --timeout: a number of at least 0 (an empty value, as an unset variable gives, is none). */
function timeoutSeconds(value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  const n = value.trim() === '' ? NaN : Number(value)
  if (!Number.isFinite(n) || n < 0)
    throw new UsageError(`--timeout takes a number of seconds; got "${value}"`)
  return n
}

/** A run by its id or a prefix of it (issue 51). */
const runRef = (deps: Deps, ref: string) => resolveId(deps.client(), 'run', ref)

/** The gate a run waits at, as its `run.waiting_on_gate` event names it (DESIGN 6). */
interface WaitingGate {
  id: string
  kind: string
  tool: string | null
}

function gateOf(event: RunEvent): WaitingGate | undefined {
  if (event.type !== 'run.waiting_on_gate') return undefined
  const { gateId, kind, tool } = event.payload
  if (typeof gateId !== 'string') return undefined
  return { id: gateId, kind: String(kind ?? 'tool'), tool: typeof tool === 'string' ? tool : null }
}

/** What a follower says once when the run stops at a gate: which, and the command that decides it. */
export function gateNote(gate: WaitingGate): string {
  const how =
    gate.kind === 'question'
      ? `a question: answer it with \`osctl gates answer ${gate.id} --answer TEXT\``
      : `a tool call${gate.tool ? ` (${gate.tool})` : ''}: decide it with ` +
        `\`osctl gates decide ${gate.id} --approve\` (or --reject --note WHY)`
  return `the run waits at gate ${gate.id}, ${how}, or in \`osctl gates review\`; still waiting`
}

/**
 * What a follower says once when the run waits for a pause to end (issue 50): what is paused, why,
 * and the command that lets it go.
 */
export function pauseNote(run: Pick<Run, 'taskSlug'>, pause: NonNullable<Run['paused']>): string {
  const what = pause.scope === 'task' ? 'its task is paused' : 'the enterprise is paused'
  const resume =
    pause.scope === 'task'
      ? `osctl tasks resume ${safeText(run.taskSlug)}`
      : 'osctl enterprise resume'
  return `the run waits: ${what} (${safeText(pause.reason)}); it goes on once resumed: \`${resume}\`; still waiting`
}

/**
 * pauseNote for a run a follower read, once per pause: undefined when the run is not held by a
 * pause, or when `told` (the pauses said so far) has this one already.
 */
export function pauseNoteOnce(run: Run, told: Set<string>): string | undefined {
  const pause = run.paused
  if (!pause) return undefined
  const key = `pause ${pause.scope} ${pause.at}`
  if (told.has(key)) return undefined
  told.add(key)
  return pauseNote(run, pause)
}

/**
 * The one follower of `runs start --wait`, `runs wait` and `runs watch`: each event as a line on
 * stderr, and on a terminal a spinner with the run's status and the time spent waiting. A run that
 * stops at a gate is said once per gate, with the command that decides it (issue 27); a gate of the
 * run's past (the first read answers every event so far) is not, since the run no longer waits there.
 * A run held by a pause is said once per pause, with the command that resumes it: its events alone
 * (a start that waits from the first) would not say why nothing happens.
 * Whether it waits is read from its events, not its status: a read answers the run's row and its
 * events from two queries, so the row may predate the gate event of the same answer, and the note
 * then waited for the next read, held 25 s for an event that comes only once the gate is decided.
 */
async function follow(deps: Deps, id: string, timeout?: number): Promise<FollowResult> {
  const spinner = startSpinner(deps.out, `run ${id.slice(0, 8)}`)
  /** The gate the run's latest event says it waits at, if it does. */
  let waitingAt: WaitingGate | undefined
  const told = new Set<string>()
  try {
    return await interruptible(deps.onInterrupt, id, (signal) =>
      followRun(deps.client(), id, {
        signal,
        timeoutSeconds: timeout,
        onEvent: (event) => {
          // On stderr: fitted to the terminal when stderr is one, else whole (issue 51).
          spinner.line(
            formatEvent(event, { isTTY: deps.out.errorIsTTY, columns: deps.out.columns }),
          )
          waitingAt = gateOf(event)
        },
        onRun: (run) => {
          spinner.update(`run ${run.id.slice(0, 8)} ${run.status}`)
          if (waitingAt && !told.has(waitingAt.id)) {
            told.add(waitingAt.id)
            spinner.line(gateNote(waitingAt))
          }
          const paused = pauseNoteOnce(run, told)
          if (paused) spinner.line(paused)
        },
        onRetry: (err, ms) =>
          spinner.line(`${err.message}; reading again in ${(ms / 1000).toFixed(1)}s`),
      }),
    )
  } finally {
    spinner.stop()
  }
}

/**
 * The end of a wait, with the exit code of waitExitCode (0 succeeded, 1 ended otherwise, 8 timeout).
 * On a terminal a short summary of the run (issue 27); with --json or off a terminal the run's JSON on
 * stdout and the reason on stderr, as pipelines have always read it. Under GitHub Actions, an
 * `::error::` line for a run that did not succeed and the step's summary too (cli/github.ts).
 */
async function endWait(
  deps: Deps,
  result: FollowResult,
  timeout: number | undefined,
): Promise<void> {
  const code = waitExitCode(result)
  const { id, status, reason } = result.run
  const human = deps.out.isTTY && !deps.out.json
  if (human) printRunSummary(deps.out, result.run)
  else printJson(deps.out, result.run)
  await reportToGithub(result.run, { ended: result.ended, timeout }, (text) => deps.out.error(text))
  if (code === exitCodes.pending)
    throw afterAnswer(`run ${id} is still ${status} after ${timeout}s`, code)
  // The summary has said how it ended and why: the exit code is left to say the rest.
  if (code !== exitCodes.ok)
    throw afterAnswer(
      human ? '' : `run ${id} ${status}${reason ? `: ${safeText(reason)}` : ''}`,
      code,
    )
}

/** A run as a person reads it at the end of a wait: how it ended, why, what it cost, how long. */
export function printRunSummary(out: Output, run: Run, now = Date.now()): void {
  const reason = run.reason ?? run.blockedReason ?? null
  const started = Date.parse(run.startedAt ?? run.createdAt)
  const ended = run.finishedAt ? Date.parse(run.finishedAt) : now
  const fields: [string, unknown][] = [
    ['status', statusText(out, run.status)],
    ['outcome', run.result?.outcome],
    ['summary', run.result?.summary],
    ['reason', reason],
    ['cost', cost(run.costUsdCents, run.costUnpriced)],
    ['duration', `${duration(ended - started)}${run.finishedAt ? '' : ' so far'}`],
    ['run', `${run.id} (${run.taskSlug})`],
  ]
  printFields(
    out,
    fields.filter(([, value]) => value !== undefined && value !== null && value !== ''),
  )
}

export async function listRuns(
  deps: Deps,
  opts: PageFlags & { task?: string; taskVersion?: string; status?: string; live?: boolean },
): Promise<void> {
  const filters = {
    taskId: opts.task ? await taskId(deps.client(), opts.task) : undefined,
    taskVersionId: opts.taskVersion,
    status: opts.status,
    live: opts.live ? 'true' : undefined,
  }
  await printPaged(deps, '/runs', filters, opts, columns(deps.out), 'runs')
}

/** An event under a run's fields on stdout, indented: on a terminal the indented line fits it. */
function eventLine(out: Output, event: RunEvent): string {
  return formatEvent(event, { isTTY: out.isTTY, columns: out.columns - 2 })
}

export async function getRun(deps: Deps, ref: string, opts: { after?: string }): Promise<void> {
  const detail = await deps
    .client()
    .get<RunDetail>(`/runs/${await runRef(deps, ref)}`, { afterEventId: opts.after })
  show(deps.out, detail, () => {
    printFields(deps.out, [
      ...runFields(deps.out, detail.run),
      ['version', detail.version?.number],
      ['previous', detail.previous && `${detail.previous.id} (${detail.previous.taskSlug})`],
      ['next', detail.next.length ? detail.next.map((r) => `${r.id} (${r.taskSlug})`) : null],
      [
        'forks',
        detail.forks?.length ? detail.forks.map((f) => `${f.runId} (step ${f.step})`) : null,
      ],
      ['gates', detail.gates.length],
      // Said here, so that a later fork or retry that does not find it is no surprise (issue 46).
      ...(detail.archived ? [['archived', archivedText] as [string, unknown]] : []),
    ])
    deps.out.write(`\nevents${opts.after ? ` after ${opts.after}` : ''}:\n`)
    if (detail.events.length === 0) deps.out.write('  (none)\n')
    for (const event of detail.events) {
      deps.out.write(`  ${eventLine(deps.out, event)}\n`)
    }
  })
}

export async function runLog(deps: Deps, ref: string): Promise<void> {
  const log = await deps
    .client()
    .get<{ runId: string; body: string }>(`/runs/${await runRef(deps, ref)}/log`)
  show(deps.out, log, () => {
    const body = safeText(log.body, { multiline: true })
    deps.out.write(body.endsWith('\n') ? body : `${body}\n`)
  })
}

/** GET /v1/runs/{id}/os-tool: the short view an agent's os tool reads (status, task, input, last events). */
export async function osToolView(deps: Deps, ref: string): Promise<void> {
  const view = await deps.client().get<OsToolView>(`/runs/${await runRef(deps, ref)}/os-tool`)
  show(deps.out, view, () => {
    printFields(deps.out, [
      ['status', statusText(deps.out, view.status)],
      ['task', `${view.task.slug} (${view.task.id})`],
      ['input', JSON.stringify(view.input)],
    ])
    deps.out.write('\nlast events:\n')
    if (view.events.length === 0) deps.out.write('  (none)\n')
    for (const event of view.events) {
      deps.out.write(`  ${eventLine(deps.out, event)}\n`)
    }
  })
}

/** One run by its id, or every run a filter matches (runs-bulk.ts); not both, not neither. */
function oneOrFilter(ref: string | undefined, opts: BulkFlags): string | undefined {
  if (ref !== undefined && hasFilter(opts))
    throw new UsageError(
      'give a run id or a filter (--task, --status, --origin, --since, --until), not both',
    )
  if (ref === undefined && !hasFilter(opts))
    throw new UsageError('give a run id, or a filter: --task, --status, --origin, --since, --until')
  if (ref !== undefined && opts.dryRun) throw new UsageError('--dry-run goes with a filter')
  if (ref !== undefined && opts.reason !== undefined)
    throw new UsageError('--reason goes with a filter')
  return ref
}

export async function cancelRun(
  deps: Deps,
  ref: string | undefined,
  opts: BulkFlags,
): Promise<void> {
  if (oneOrFilter(ref, opts) === undefined) return bulkRuns(deps, 'cancel', opts)
  const id = await runRef(deps, ref!)
  await confirmDestructive(deps, opts.yes, `Cancel run ${id}`)
  showRun(deps, await deps.client().post<Run>(`/runs/${id}/cancel`))
}

export async function retryRun(
  deps: Deps,
  ref: string | undefined,
  opts: BulkFlags = {},
): Promise<void> {
  if (oneOrFilter(ref, opts) === undefined) return bulkRuns(deps, 'retry', opts)
  showRun(deps, await deps.client().post<Run>(`/runs/${await runRef(deps, ref!)}/retry`))
}

/** The filter flags of `runs cancel` and `runs retry` (issue 50). */
function withFilterOptions(command: Command, action: string): Command {
  return (
    command
      .option('--task <task>', `${action} the runs of this task (id or slug)`)
      .addOption(new Option('--status <status>', 'only runs in this status').choices(runStatuses))
      // Not a fixed list of choices: the daemon says which origins it knows (a newer one may know more).
      .option('--origin <origin>', 'only runs started this way: api, schedule, webhook, retry, ...')
      .option(
        '--since <time>',
        'only runs started at or after: an ISO time, or an age (30m, 2h, 7d)',
      )
      .option('--until <time>', 'only runs started before: an ISO time, or an age')
      .option('--dry-run', 'say how many runs match, and do nothing')
      .option('--reason <text>', 'with a filter: why, kept with the operation')
      .option('-y, --yes', 'do not ask')
  )
}

/** GET /v1/runs/{id}/steps: the run's journal as a table, to choose a step to fork from. */
export async function listSteps(deps: Deps, ref: string): Promise<void> {
  const { steps } = await deps.client().get<RunSteps>(`/runs/${await runRef(deps, ref)}/steps`)
  show(deps.out, steps, () =>
    printTable(deps.out, steps, [
      { header: 'STEP', value: (s: RunStep) => s.step },
      { header: 'KIND', value: (s: RunStep) => s.kind },
      { header: 'NAME', value: (s: RunStep) => s.name },
      { header: 'STATUS', value: (s: RunStep) => stepStatus(deps.out, s) },
      { header: 'CALLS', value: (s: RunStep) => s.toolCalls.join(' ') },
      { header: 'COST', value: (s: RunStep) => cost(s.costUsdCents, false) },
      { header: 'STARTED', value: (s: RunStep) => s.startedAt },
      { header: 'FORK', value: (s: RunStep) => (s.forkable ? 'yes' : 'no') },
    ]),
  )
}

/** A step's status as a person chooses by it: an error, a gate's state, a step copied by a fork. */
function stepStatus(out: Output, step: RunStep): Styled | string {
  const gate = step.gate && (step.gate.status === 'waiting' ? 'gate waiting' : step.gate.decision)
  const text = [step.status, step.isError ? 'error' : null, gate, step.copied ? 'copied' : null]
    .filter(Boolean)
    .join(', ')
  if (step.isError || step.status === 'failed') return colour(out, 'red', text)
  return step.status === 'started' ? colour(out, 'yellow', text) : text
}

/** POST /v1/runs/{id}/fork: a new run going on live from a step, the steps before it reused. */
export async function forkRun(
  deps: Deps,
  ref: string,
  opts: {
    fromStep: string
    taskVersion?: string
    tier?: string
    reason?: string
    wait?: boolean
    timeout?: string
  },
): Promise<void> {
  const timeout = waitTimeout(opts)
  const fromStep = Number(opts.fromStep)
  if (!Number.isInteger(fromStep) || fromStep < 1)
    throw new UsageError(`--from-step takes a step number (1 or more); got "${opts.fromStep}"`)
  const run = await deps.client().post<Run>(`/runs/${await runRef(deps, ref)}/fork`, {
    fromStep,
    ...(opts.taskVersion ? { versionId: opts.taskVersion } : {}),
    ...(opts.tier ? { modelTier: opts.tier } : {}),
    ...(opts.reason ? { reason: opts.reason } : {}),
  })
  await showStarted(deps, run, opts.wait, timeout)
}

export async function clearRun(deps: Deps, ref: string): Promise<void> {
  showRun(deps, await deps.client().post<Run>(`/runs/${await runRef(deps, ref)}/clear`))
}

export async function startRun(
  deps: Deps,
  ref: string,
  opts: {
    input?: string[]
    data?: string
    file?: string
    wait?: boolean
    timeout?: string
    inputCheck?: boolean
  },
): Promise<void> {
  const timeout = waitTimeout(opts)
  const input = await readInput(deps, opts)
  const client = deps.client()
  const id = await taskId(client, ref)
  if (opts.inputCheck !== false) await checkInputOf(client, id, input)
  // CI systems put the pipeline's trace context in TRACEPARENT: sent on, the run's spans are part
  // of the pipeline's trace (issue 49). One that is not well formed is not sent.
  const traceParent = wellFormedTraceParent(process.env.TRACEPARENT)
  const run = await client
    .request<Run>('POST', `/tasks/${id}/runs`, {
      body: input,
      ...(traceParent ? { headers: { traceparent: traceParent } } : {}),
    })
    .catch((err: unknown) => {
      throw withRecordedRun(err)
    })
  await showStarted(deps, run, opts.wait, timeout)
}

/**
 * The input checked against the inputs the task's current version declares (issue 51), before it is
 * sent. A token that may start the task's runs but not read the task (tasks:write without
 * tasks:read) sends as it is: the check is osctl's help, the API's rule is the input as sent.
 */
async function checkInputOf(
  client: ApiClient,
  id: string,
  input: Record<string, unknown>,
): Promise<void> {
  // Read leniently: an answer without a version's inputs is a task that declares none.
  let task: { slug?: string; currentVersion?: { definition?: Partial<VersionDefinition> } }
  try {
    task = await client.get<typeof task>(`/tasks/${id}`)
  } catch (err) {
    if (err instanceof ApiRequestError && err.status === 403) return
    throw err
  }
  checkRunInput(task.slug ?? id, task.currentVersion?.definition?.inputs, input)
}

/** The --timeout of a verb that starts a run, checked before anything is sent: it goes with --wait. */
export function waitTimeout(opts: { wait?: boolean; timeout?: string }): number | undefined {
  if (opts.timeout !== undefined && !opts.wait) throw new UsageError('--timeout goes with --wait')
  return timeoutSeconds(opts.timeout)
}

/**
 * A run a verb just started (runs start, memory train): printed, or with --wait followed to its end
 * as `runs wait` does (its JSON on stdout, exit 0 only if it succeeded).
 */
export async function showStarted(
  deps: Deps,
  run: Run,
  wait: boolean | undefined,
  timeout: number | undefined,
): Promise<void> {
  if (!wait) return showRun(deps, run)
  deps.out.error(`started run ${run.id} of ${safeText(run.taskSlug)}\n`)
  await endWait(deps, await follow(deps, run.id, timeout), timeout)
}

/** A refused start (overlap, member_busy) is kept as a run: its message names it, for `runs get`. */
function withRecordedRun(err: unknown): unknown {
  if (!(err instanceof ApiRequestError)) return err
  const runId = (err.body as { runId?: unknown } | null)?.runId
  if (typeof runId !== 'string') return err
  return new ApiRequestError(
    err.status,
    err.code,
    `${err.message} The refusal is kept as run ${runId}.`,
    err.body,
  )
}

export async function waitRun(deps: Deps, ref: string, opts: { timeout?: string }): Promise<void> {
  const timeout = timeoutSeconds(opts.timeout)
  await endWait(deps, await follow(deps, await runRef(deps, ref), timeout), timeout)
}

/** Prints the run's events as they arrive; exits 0 once it has ended, however it ended. */
export async function watchRun(deps: Deps, ref: string): Promise<void> {
  const { run } = await follow(deps, await runRef(deps, ref))
  show(deps.out, run, () =>
    deps.out.write(
      `${run.id}  ${statusText(deps.out, run.status)}${run.reason ? `  ${safeText(run.reason)}` : ''}\n`,
    ),
  )
}

export function registerRuns(program: Command, makeDeps: MakeDeps): void {
  const runs = program.command('runs').description(about.runs)
  examples(
    withPageOptions(
      runs
        .command('list')
        .description('runs, newest first, a page at a time (--all for every one)')
        .option('--task <task>', 'task id or slug')
        // Not --version: osctl's own --version (anywhere on the line) would answer first.
        .option('--task-version <versionId>', 'task version id')
        .addOption(new Option('--status <status>').choices(runStatuses))
        .option('--live', 'unfinished runs only, blocked and paused left out'),
      runSorts,
    ).action(actionOf(makeDeps, listRuns)),
    'osctl runs list --task nightly-report --status failed',
    'osctl runs list --live --all --json',
  )
  examples(
    runs
      .command('get')
      .argument('<run>', 'run id, or its first 8+ characters')
      .option('--after <eventId>', 'only the events after this one')
      .description('the run, its events and gates')
      .action(actionOf(makeDeps, getRun)),
    'osctl runs get 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    runs
      .command('log')
      .argument('<run>', 'run id, or its first 8+ characters')
      .description("the run's full log, once stored")
      .action(actionOf(makeDeps, runLog)),
    'osctl runs log 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 > run.log',
  )
  examples(
    runs
      .command('os-tool')
      .argument('<run>', 'run id, or its first 8+ characters')
      .description(
        "the short view of a run an agent's os tool reads: status, task, input, last 8 events",
      )
      .action(actionOf(makeDeps, osToolView)),
    'osctl runs os-tool 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --json',
  )
  examples(
    withFilterOptions(
      runs
        .command('cancel')
        .argument('[run]', 'run id; or a filter instead, for every run it matches')
        .description(
          'cancel a run that has not ended; with a filter, every matching run not ended (the count first, then asks)',
        ),
      'cancel',
    ).action(actionOf(makeDeps, cancelRun)),
    'osctl runs cancel 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --yes',
    'osctl runs cancel --task weekly-mail --status pending --dry-run',
    'osctl runs cancel --task weekly-mail --since 2h --yes',
  )
  examples(
    withFilterOptions(
      runs
        .command('retry')
        .argument('[run]', 'run id; or a filter instead, for every run it matches')
        .description(
          "a new run on the task's current version; repeated while pending, the same one; with a filter, every matching ended run",
        ),
      'retry',
    ).action(actionOf(makeDeps, retryRun)),
    'osctl runs retry 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
    'osctl runs retry --status failed --since 2026-11-28T06:00:00Z --until 2026-11-28T09:00:00Z --yes',
  )
  examples(
    runs
      .command('steps')
      .argument('<run>', 'run id, or its first 8+ characters')
      .description("the run's steps (model calls, tool calls, gates), to choose one to fork from")
      .action(actionOf(makeDeps, listSteps)),
    'osctl runs steps 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    runs
      .command('fork')
      .argument('<run>', 'run id, or its first 8+ characters')
      .requiredOption(
        '--from-step <n>',
        'the first step made again; the steps before it are reused',
      )
      // Not --version: osctl's own --version (anywhere on the line) would answer first.
      .option('--task-version <versionId>', "a version of the run's task (default: the run's own)")
      .addOption(
        new Option('--tier <tier>', "the model tier instead of the version's").choices(modelTiers),
      )
      .option('--reason <text>', 'why, kept with the fork')
      .option('--wait', 'follow the fork to its end; exit 0 only if it succeeded')
      .option('--timeout <seconds>', 'with --wait: give up after this long (exit 8)')
      .description(
        'a new run of the same task and input going on live from a step; the steps before it are reused at no cost',
      )
      .action(actionOf(makeDeps, forkRun)),
    'osctl runs fork 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --from-step 38 --wait',
    'osctl runs fork 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --from-step 3 --tier frontier',
  )
  examples(
    runs
      .command('clear')
      .argument('<run>', 'run id, or its first 8+ characters')
      .description('take a failed run or a stopped pipeline off Blockers')
      .action(actionOf(makeDeps, clearRun)),
    'osctl runs clear 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    runs
      .command('start')
      .argument('<task>', 'id or slug')
      .option('--input <key=value>', 'input field, the value read as JSON when it parses', collect)
      .option('-d, --data <json>', 'input as a JSON object ("-" reads stdin)')
      .option('-f, --file <file>', 'input from a JSON file ("-" reads stdin)')
      .option('--wait', 'follow the run to its end; exit 0 only if it succeeded')
      .option('--timeout <seconds>', 'with --wait: give up after this long (exit 8)')
      .option(
        '--no-input-check',
        "send the input as it is, unchecked against the task's declared inputs",
      )
      .description(
        "start a run of a task; --input pairs are laid over -d/-f, and the input is checked against the task's declared inputs (exit 2); a TRACEPARENT in the environment (as CI systems set it) is sent, so the run's spans join that trace",
      )
      .action(actionOf(makeDeps, startRun)),
    'osctl runs start nightly-report --input region=eu --input days=7',
    'osctl runs start nightly-report -f input.json --wait --timeout 600',
    'osctl runs start nightly-report -d \'{"region":"eu","extra":1}\' --no-input-check',
  )
  examples(
    runs
      .command('watch')
      .argument('<run>', 'run id, or its first 8+ characters')
      .description("print the run's events as they arrive, until it ends")
      .action(actionOf(makeDeps, watchRun)),
    'osctl runs watch 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    runs
      .command('wait')
      .argument('<run>', 'run id, or its first 8+ characters')
      .option('--timeout <seconds>', 'give up after this long (exit 8)')
      .description('wait for the run to end: exit 0 succeeded, 1 failed or cancelled, 8 timeout')
      .action(actionOf(makeDeps, waitRun)),
    'osctl runs wait 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --timeout 300 && echo done',
  )
}

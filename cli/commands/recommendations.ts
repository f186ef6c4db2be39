import { Option, type Command } from 'commander'
import type {
  Recommendation,
  RecommendationDecision,
  RecommendationDetail,
} from '../../shared/schemas/recommendations.js'
import type { Run } from '../../shared/schemas/runs.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { colour, printFields, printTable, show, type Output } from '../output.js'
import { idRef, taskId } from '../resolve.js'
import { safeText } from '../safe-text.js'
import { about } from './about.js'
import { showStarted, waitTimeout } from './runs.js'

// `osctl recommendations` (spec: Concepts "Recommendations", Endpoints Recommendations; DESIGN 10): the
// changes os-improve runs proposed to tasks, read with their diff and approved or declined by a person;
// and, under `osctl tasks`, a task's recommendations and `tasks improve`, which starts an os-improve run.

const recRef = (ref: string) => idRef(ref, 'a recommendation')

/** The longest reason a decision takes (spec: Limits; the API refuses longer). */
const maxReason = 2000
const maxKey = 80

const statusText = (out: Output, status: Recommendation['status']) =>
  status === 'waiting'
    ? colour(out, 'yellow', status)
    : status === 'approved'
      ? colour(out, 'green', status)
      : colour(out, 'dim', status)

function columns(out: Output) {
  return [
    { header: 'ID', value: (r: Recommendation) => r.id },
    { header: 'TASK', value: (r: Recommendation) => r.taskSlug },
    { header: 'STATUS', value: (r: Recommendation) => statusText(out, r.status) },
    { header: 'CHANGES', value: (r: Recommendation) => Object.keys(r.changes).join(', ') },
    { header: 'EVIDENCE', value: (r: Recommendation) => String(r.evidence.length) },
    { header: 'CREATED', value: (r: Recommendation) => r.createdAt },
  ]
}

function fields(out: Output, r: Recommendation): [string, unknown][] {
  return [
    ['id', r.id],
    ['task', `${r.taskSlug} (${r.taskId})`],
    ['status', statusText(out, r.status)],
    ['base version', r.baseVersionId],
    ['proposed by run', r.proposedByRunId],
    ['created', r.createdAt],
    ['decision', r.decision],
    ['reason', r.reason],
    ['decided by', r.decidedBy],
    ['decided at', r.decidedAt],
    ['version', r.versionId],
    ['run', r.runId],
  ]
}

function showRecommendation(deps: Deps, r: Recommendation): void {
  show(deps.out, r, () => printFields(deps.out, fields(deps.out, r)))
}

const json = (value: unknown) => JSON.stringify(value ?? null, null, 2)

/**
 * The changes against the base version: each field as removed and added lines (a JSON value), the
 * skill as its line diff; red and green on a terminal (not with NO_COLOR).
 */
export function printDiff(out: Output, detail: RecommendationDetail): void {
  const removed = (text: string) => colour(out, 'red', `- ${text}`)
  const added = (text: string) => colour(out, 'green', `+ ${text}`)
  for (const change of detail.fieldChanges) {
    if (change.field === 'skillMd') continue
    out.write(`\n${safeText(change.field)}:\n`)
    for (const line of json(change.before).split('\n')) out.write(`${removed(line)}\n`)
    for (const line of json(change.after).split('\n')) out.write(`${added(line)}\n`)
  }
  if (detail.skillDiff) {
    out.write('\nskillMd:\n')
    for (const line of detail.skillDiff)
      out.write(
        `${line.kind === 'removed' ? removed(line.text) : line.kind === 'added' ? added(line.text) : colour(out, 'dim', `  ${line.text}`)}\n`,
      )
  }
}

export async function listRecommendations(
  deps: Deps,
  opts: { task?: string; decided?: boolean },
): Promise<void> {
  const client = deps.client()
  const recs = await client.get<Recommendation[]>('/recommendations', {
    taskId: opts.task ? await taskId(client, opts.task) : undefined,
    view: opts.decided ? 'decided' : undefined,
  })
  show(deps.out, recs, () => printTable(deps.out, recs, columns(deps.out)))
}

export async function getRecommendation(deps: Deps, ref: string): Promise<void> {
  const detail = await deps.client().get<RecommendationDetail>(`/recommendations/${recRef(ref)}`)
  const out = deps.out
  show(out, detail, () => {
    printFields(out, [
      ...fields(out, detail),
      [
        'base is current',
        detail.baseIsCurrent
          ? 'yes'
          : colour(out, 'red', 'no: the task changed since; approving is refused'),
      ],
    ])
    out.write(
      `\nrationale:\n${safeText(detail.rationale, { multiline: true }).replace(/^/gm, '  ')}\n`,
    )
    if (detail.evidence.length) {
      out.write('\nevidence:\n')
      for (const e of detail.evidence)
        out.write(`  ${e.runId}${e.why ? `  ${safeText(e.why)}` : ''}\n`)
    }
    out.write(`\nchanges against version ${detail.baseVersionNumber ?? detail.baseVersionId}:\n`)
    printDiff(out, detail)
  })
}

function checkKey(key: string | undefined): void {
  if (key !== undefined && (key.length < 1 || key.length > maxKey))
    throw new UsageError(`--idempotency-key: 1 to ${maxKey} characters`)
}

async function decide(deps: Deps, ref: string, body: RecommendationDecision): Promise<void> {
  const id = recRef(ref)
  checkKey(body.idempotencyKey)
  if (body.reason !== undefined && body.reason.length > maxReason)
    throw new UsageError(`--reason: at most ${maxReason} characters`)
  showRecommendation(
    deps,
    await deps.client().post<Recommendation>(`/recommendations/${id}/decision`, body),
  )
}

export async function approveRecommendation(
  deps: Deps,
  ref: string,
  opts: { note?: string; idempotencyKey?: string },
): Promise<void> {
  await decide(deps, ref, {
    decision: 'approve',
    ...(opts.note !== undefined ? { reason: opts.note } : {}),
    ...(opts.idempotencyKey !== undefined ? { idempotencyKey: opts.idempotencyKey } : {}),
  })
}

export async function declineRecommendation(
  deps: Deps,
  ref: string,
  opts: { reason: string; idempotencyKey?: string },
): Promise<void> {
  if (!opts.reason.trim()) throw new UsageError('a decline needs --reason TEXT: say why')
  await decide(deps, ref, {
    decision: 'decline',
    reason: opts.reason,
    ...(opts.idempotencyKey !== undefined ? { idempotencyKey: opts.idempotencyKey } : {}),
  })
}

export async function taskRecommendations(
  deps: Deps,
  ref: string,
  opts: { view?: string },
): Promise<void> {
  const client = deps.client()
  const recs = await client.get<Recommendation[]>(
    `/tasks/${await taskId(client, ref)}/recommendations`,
    { view: opts.view },
  )
  show(deps.out, recs, () => printTable(deps.out, recs, columns(deps.out)))
}

/** `tasks improve`: an os-improve run of the task, started as any run is (POST /v1/tasks/{id}/runs). */
export async function improveTask(
  deps: Deps,
  ref: string,
  opts: { wait?: boolean; timeout?: string },
): Promise<void> {
  const timeout = waitTimeout(opts)
  const client = deps.client()
  const target = await taskId(client, ref)
  const improve = await taskId(client, 'os-improve')
  const run = await client.post<Run>(`/tasks/${improve}/runs`, { taskId: target })
  await showStarted(deps, run, opts.wait, timeout)
}

const keyOption = () =>
  new Option(
    '--idempotency-key <key>',
    'repeat a decision safely: the same key from the same token answers the first decision again',
  )

/**
 * `osctl tasks improve` and `osctl tasks recommendations`: registered with `osctl tasks`
 * (program.ts), which they hang under.
 */
export function registerTaskVerbs(tasks: Command, makeDeps: MakeDeps): void {
  examples(
    tasks
      .command('improve')
      .argument('<task>', 'id or slug of the task to improve')
      .option('--wait', 'follow the os-improve run to its end; exit 0 only if it succeeded')
      .option('--timeout <seconds>', 'with --wait: give up after this long (exit 8)')
      .description(
        'start an os-improve run: it studies the task’s recent runs and gate decisions and may propose a change',
      )
      .action(actionOf(makeDeps, improveTask)),
    'osctl tasks improve nightly-report',
    'osctl tasks improve nightly-report --wait && osctl recommendations list --task nightly-report',
  )
  examples(
    tasks
      .command('recommendations')
      .argument('<task>', 'id or slug')
      .addOption(
        new Option(
          '--view <view>',
          'all (default), waiting, or decided in the last 60 days',
        ).choices(['all', 'waiting', 'decided']),
      )
      .description("the task's recommendations, newest first")
      .action(actionOf(makeDeps, taskRecommendations)),
    'osctl tasks recommendations nightly-report',
  )
}

export function registerRecommendations(program: Command, makeDeps: MakeDeps): void {
  const recs = program.command('recommendations').description(about.recommendations)
  examples(
    recs
      .command('list')
      .option('--task <task>', 'only this task’s (id or slug)')
      .option('--decided', 'those decided in the last 60 days instead of those waiting')
      .description('the recommendations waiting, newest first')
      .action(actionOf(makeDeps, listRecommendations)),
    'osctl recommendations list',
    'osctl recommendations list --task nightly-report --decided --json',
  )
  examples(
    recs
      .command('get')
      .argument('<recommendation>', 'recommendation id')
      .description(
        'one in full: rationale, evidence, and the changes against the base version (a line diff of the skill)',
      )
      .action(actionOf(makeDeps, getRecommendation)),
    'osctl recommendations get 7c1e2d3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f',
  )
  examples(
    recs
      .command('approve')
      .argument('<recommendation>', 'recommendation id')
      .option('--note <text>', 'why (optional)')
      .addOption(keyOption())
      .description(
        'approve: publish the changes as a new version and start a run of the task on it',
      )
      .action(actionOf(makeDeps, approveRecommendation)),
    'osctl recommendations approve 7c1e2d3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f',
  )
  examples(
    recs
      .command('decline')
      .argument('<recommendation>', 'recommendation id')
      .requiredOption('--reason <text>', 'why (needed; up to 2,000 characters)')
      .addOption(keyOption())
      .description('decline, with the reason; nothing changes')
      .action(actionOf(makeDeps, declineRecommendation)),
    'osctl recommendations decline 7c1e2d3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f --reason "the PO rule is going away"',
  )
}

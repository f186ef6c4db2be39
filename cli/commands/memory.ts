import { Argument, Option, type Command } from 'commander'
import {
  memoryLayers,
  noteKinds,
  noteSorts,
  noteStatuses,
  trainLayers,
} from '../../shared/values.js'
import type {
  MemoryAsk,
  MemoryNote,
  NotePage,
  RecallHealth,
  RecalledNote,
  ReviewDecision,
  ReviewItem,
  TaskMemory,
} from '../../shared/schemas/memory.js'
import type { Run } from '../../shared/schemas/runs.js'
import { shorten } from '../../shared/text.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { colour, printFields, printTable, show } from '../output.js'
import { positiveInt, printPaged, withPageOptions, type PageFlags } from '../paging.js'
import { idRef, taskId, teamId } from '../resolve.js'
import { safeText } from '../safe-text.js'
import { about } from './about.js'
import { showStarted, waitTimeout } from './runs.js'

// `osctl memory` (spec: Concepts "Memory", Endpoints Memory; DESIGN 10): the notes the company learns
// per task, team or enterprise, their search, ratings, the review queue and recall health; and
// `osctl tasks memory`, the same notes from one task's side (/v1/tasks/{id}/memory...).

type TrainLayer = (typeof trainLayers)[number]

const noteRef = (ref: string) => idRef(ref, 'a note')
const itemRef = (ref: string) => idRef(ref, 'a review item')

/**
 * A note's text on one line. Tables print it whole: on a terminal printTable cuts it to fit, in a pipe
 * nothing is cut (issue 27).
 */
export function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim()
}

/** A text on one line, cut to `width` characters, for a line of prose that quotes it. */
function quoted(text: string, width: number): string {
  return shorten(oneLine(text), width)
}

/** Whose note it is: the task or team of its layer (the enterprise layer has neither). */
const owner = (n: { taskId: string | null; teamId: string | null }) => n.taskId ?? n.teamId

const ratings = (n: MemoryNote) => `+${n.ratingUp} -${n.ratingDown}`

/** A rate as a percentage, or - without runs to have one. */
const percent = (rate: number | null) => (rate === null ? '-' : `${Math.round(rate * 100)}%`)
/** A lift in percentage points, signed; - while either side has fewer than 5 runs. */
const lift = (value: number | null) =>
  value === null ? '-' : `${value > 0 ? '+' : ''}${(value * 100).toFixed(1)}`

const noteColumns = [
  { header: 'ID', value: (n: MemoryNote) => n.id },
  { header: 'LAYER', value: (n: MemoryNote) => n.layer },
  { header: 'OWNER', value: owner },
  { header: 'TEXT', value: (n: MemoryNote) => oneLine(n.text) },
  { header: 'RATINGS', value: ratings },
  { header: 'RECALLS', value: (n: MemoryNote) => n.recalls },
]

/** `memory impact`: what each note did to outcomes, best lift first. */
const impactColumns = [
  { header: 'LIFT', value: (n: MemoryNote) => lift(n.impact.lift) },
  {
    header: 'SUCCESS',
    value: (n: MemoryNote) =>
      n.impact.recalledRuns ? `${percent(n.impact.successRate)} of ${n.impact.recalledRuns}` : '-',
  },
  { header: 'BASE', value: (n: MemoryNote) => percent(n.impact.baseRate) },
  { header: 'RECALLS', value: (n: MemoryNote) => n.recalls },
  { header: 'LAYER', value: (n: MemoryNote) => n.layer },
  { header: 'TEXT', value: (n: MemoryNote) => oneLine(n.text) },
  { header: 'ID', value: (n: MemoryNote) => n.id },
]

const recalledColumns = [
  { header: 'SCORE', value: (n: RecalledNote) => n.score.toFixed(3) },
  { header: 'LAYER', value: (n: RecalledNote) => n.layer },
  { header: 'KIND', value: (n: RecalledNote) => n.kind },
  { header: 'TEXT', value: (n: RecalledNote) => oneLine(n.text) },
  { header: 'ID', value: (n: RecalledNote) => n.id },
]

const reviewColumns = [
  { header: 'ID', value: (i: ReviewItem) => i.id },
  { header: 'KIND', value: (i: ReviewItem) => i.kind },
  { header: 'NOTE', value: (i: ReviewItem) => oneLine(i.note.text) },
  {
    header: 'WHY',
    value: (i: ReviewItem) => (i.correction ? `proposed: ${oneLine(i.correction.text)}` : i.reason),
  },
  { header: 'NOTE ID', value: (i: ReviewItem) => i.note.id },
  { header: 'CREATED', value: (i: ReviewItem) => i.createdAt },
]

const historyColumns = [
  { header: 'DECIDED', value: (d: ReviewDecision) => d.decidedAt },
  { header: 'DECISION', value: (d: ReviewDecision) => d.decision },
  { header: 'KIND', value: (d: ReviewDecision) => d.kind },
  { header: 'REASON', value: (d: ReviewDecision) => oneLine(d.reason) },
  { header: 'BY', value: (d: ReviewDecision) => d.decidedBy },
  { header: 'NOTE', value: (d: ReviewDecision) => d.noteId },
  { header: 'CORRECTION', value: (d: ReviewDecision) => d.correctionId },
  { header: 'ITEM', value: (d: ReviewDecision) => d.itemId },
]

function showNote(deps: Deps, note: MemoryNote): void {
  const out = deps.out
  show(out, note, () => {
    printFields(out, [
      ['id', note.id],
      ['layer', note.layer],
      ['task', note.taskId],
      ['team', note.teamId],
      ['kind', note.kind],
      ['status', note.status === 'active' ? note.status : colour(out, 'yellow', note.status)],
      ['source', note.source],
      ['corrects', note.correctsId],
      ['superseded by', note.supersededById],
      ['ratings', ratings(note)],
      ['recalls', note.recalls],
      [
        'valid until',
        note.validUntil &&
          (note.expired ? colour(out, 'yellow', `${note.validUntil} (expired)`) : note.validUntil),
      ],
      [
        'impact',
        note.impact.recalledRuns
          ? `${note.impact.succeeded} of ${note.impact.recalledRuns} runs that recalled it succeeded (${percent(note.impact.successRate)}), ${percent(note.impact.baseRate)} of the others; lift ${lift(note.impact.lift)}`
          : 'no finished run recalled it yet',
      ],
      ['created by', note.createdBy],
      ['created', note.createdAt],
      ['updated', note.updatedAt],
    ])
    out.write(`\n${safeText(note.text.trimEnd(), { multiline: true })}\n`)
    if (note.evidence.length) {
      out.write('\nevidence:\n')
      for (const e of note.evidence) {
        out.write(`  run ${e.runId}${e.excerpt ? `: ${quoted(safeText(e.excerpt), 100)}` : ''}\n`)
      }
    }
  })
}

function showDecision(deps: Deps, decision: ReviewDecision): void {
  show(deps.out, decision, () =>
    printFields(deps.out, [
      ['item', decision.itemId],
      ['decision', decision.decision],
      ['kind', decision.kind],
      ['note', decision.noteId],
      ['correction', decision.correctionId],
      ['reason', decision.reason],
      ['decided by', decision.decidedBy],
      ['decided at', decision.decidedAt],
    ]),
  )
}

/** A note's text from its argument; "-" reads it from stdin (a long note, a file piped in). */
async function noteText(deps: Deps, text: string): Promise<string> {
  const value = text === '-' ? (await deps.stdin()).replace(/\n$/, '') : text
  if (!value.trim()) throw new UsageError('the note is empty')
  return value
}

export async function listNotes(
  deps: Deps,
  opts: PageFlags & {
    q?: string
    layer?: string
    task?: string
    team?: string
    status?: string
    kind?: string
    expired?: boolean
  },
): Promise<void> {
  const client = deps.client()
  const filters = {
    q: opts.q,
    layer: opts.layer,
    taskId: opts.task ? await taskId(client, opts.task) : undefined,
    teamId: opts.team ? await teamId(client, opts.team) : undefined,
    status: opts.status,
    kind: opts.kind,
    expired: opts.expired ? 'true' : undefined,
  }
  await printPaged(deps, '/memory', filters, opts, noteColumns, 'notes', 'notes')
}

/**
 * `memory impact [--layer --task]` (issue 31): the notes by lift, best first, notes without one (fewer
 * than 5 runs on either side) last, with their recalls and rates.
 */
export async function noteImpact(
  deps: Deps,
  opts: PageFlags & { layer?: string; task?: string },
): Promise<void> {
  const client = deps.client()
  const filters = {
    layer: opts.layer,
    taskId: opts.task ? await taskId(client, opts.task) : undefined,
  }
  await printPaged(
    deps,
    '/memory',
    filters,
    { ...opts, sort: 'impact' },
    impactColumns,
    'notes',
    'notes',
  )
}

/** `memory extend NOTE (--until TIME | --forever)`: an active note holds until then, or with no end. */
export async function extendNote(
  deps: Deps,
  ref: string,
  opts: { until?: string; forever?: boolean },
): Promise<void> {
  if ((opts.until === undefined) === !opts.forever)
    throw new UsageError('give --until TIME or --forever')
  const note = await deps.client().patch<MemoryNote>(`/memory/${noteRef(ref)}`, {
    validUntil: opts.forever ? null : opts.until,
  })
  show(deps.out, note, () =>
    deps.out.write(
      note.validUntil
        ? `note ${note.id} holds until ${note.validUntil}\n`
        : `note ${note.id} holds with no end\n`,
    ),
  )
}

export async function getNote(deps: Deps, ref: string): Promise<void> {
  showNote(deps, await deps.client().get<MemoryNote>(`/memory/${noteRef(ref)}`))
}

/**
 * `memory ask QUESTION [--task TASK]` (issue 27): without a task, the enterprise's memory searched for
 * the question, best match first (GET /memory?q=); with one, what a run of that task would recall.
 */
export async function askMemory(
  deps: Deps,
  question: string,
  opts: { task?: string; limit?: string },
): Promise<void> {
  if (!question.trim()) throw new UsageError('the question is empty')
  if (opts.task !== undefined) return askTaskMemory(deps, opts.task, question, opts)
  const answer = await deps
    .client()
    .get<NotePage>('/memory', { q: question, limit: positiveInt('--limit', opts.limit) })
  show(deps.out, answer, () => {
    deps.out.error(`searched the enterprise's memory for: ${oneLine(question)}\n`)
    printTable(deps.out, answer.notes, noteColumns)
    if (answer.total > answer.notes.length)
      deps.out.error(
        `${answer.notes.length} of ${answer.total} notes that match: --limit N for more\n`,
      )
  })
}

/** What a run of the task would recall for the question (the task's goal without one). */
export async function askTaskMemory(
  deps: Deps,
  task: string,
  question: string | undefined,
  opts: { limit?: string },
): Promise<void> {
  const client = deps.client()
  const id = await taskId(client, task)
  const answer = await client.get<MemoryAsk>(`/tasks/${id}/memory/ask`, {
    q: question,
    limit: opts.limit,
  })
  show(deps.out, answer, () => {
    deps.out.error(`recalled for: ${oneLine(answer.question)}\n`)
    printTable(deps.out, answer.notes, recalledColumns)
  })
}

/** A person's note at the task layer; with --corrects, a correction of one of the task's notes. */
export async function addNote(
  deps: Deps,
  task: string,
  text: string,
  opts: { corrects?: string; validUntil?: string },
): Promise<void> {
  const client = deps.client()
  const id = await taskId(client, task)
  const body = {
    text: await noteText(deps, text),
    correctsId: opts.corrects ? noteRef(opts.corrects) : undefined,
    validUntil: opts.validUntil,
  }
  showNote(deps, await client.post<MemoryNote>(`/tasks/${id}/memory`, body))
}

/** A person's note or correction at the task's team layer or the enterprise layer. */
export async function trainTaskNote(
  deps: Deps,
  task: string,
  text: string,
  opts: { layer: TrainLayer; corrects?: string; validUntil?: string },
): Promise<void> {
  const client = deps.client()
  const id = await taskId(client, task)
  const body = {
    text: await noteText(deps, text),
    layer: opts.layer,
    correctsId: opts.corrects ? noteRef(opts.corrects) : undefined,
    validUntil: opts.validUntil,
  }
  showNote(deps, await client.post<MemoryNote>(`/tasks/${id}/memory/train`, body))
}

/** Starts a training run (os-train-memory) of a layer: 202 with the run, or the one under way. */
export async function trainMemory(
  deps: Deps,
  opts: { layer: TrainLayer; team?: string; wait?: boolean; timeout?: string },
): Promise<void> {
  const timeout = waitTimeout(opts)
  if (opts.layer === 'team' && opts.team === undefined)
    throw new UsageError('--layer team needs --team naming the team')
  if (opts.layer === 'enterprise' && opts.team !== undefined)
    throw new UsageError('the enterprise layer takes no --team')
  const client = deps.client()
  const body = {
    layer: opts.layer,
    teamId: opts.team !== undefined ? await teamId(client, opts.team) : undefined,
  }
  await showStarted(deps, await client.post<Run>('/memory/train', body), opts.wait, timeout)
}

export async function tombstoneNote(
  deps: Deps,
  ref: string,
  opts: { yes?: boolean },
): Promise<void> {
  const id = noteRef(ref)
  await confirmDestructive(deps, opts.yes, `Tombstone note ${id}: never answered or recalled again`)
  await deps.client().post(`/memory/${id}/tombstone`)
  show(deps.out, { tombstoned: id }, () => deps.out.write(`tombstoned note ${id}\n`))
}

export async function rateNote(
  deps: Deps,
  ref: string,
  rating: 'up' | 'down',
  opts: { reason?: string },
): Promise<void> {
  const note = await deps
    .client()
    .post<MemoryNote>(`/memory/${noteRef(ref)}/rate`, { rating, reason: opts.reason })
  show(deps.out, note, () => {
    deps.out.write(`rated note ${note.id} ${rating}: ratings ${ratings(note)}\n`)
    if (rating === 'down') deps.out.error('it waits in the review queue: osctl memory review\n')
  })
}

export async function listReview(deps: Deps, opts: PageFlags): Promise<void> {
  await printPaged(deps, '/memory/review', {}, opts, reviewColumns, 'review items', 'items')
}

export async function reviewHistory(deps: Deps, opts: PageFlags): Promise<void> {
  await printPaged(
    deps,
    '/memory/review/history',
    {},
    opts,
    historyColumns,
    'decisions',
    'decisions',
  )
}

export async function resolveItem(
  deps: Deps,
  ref: string,
  opts: { correction: string; reason: string },
): Promise<void> {
  const body = { correctionId: noteRef(opts.correction), reason: opts.reason }
  showDecision(
    deps,
    await deps.client().post<ReviewDecision>(`/memory/review/${itemRef(ref)}/resolve`, body),
  )
}

export async function dismissItem(
  deps: Deps,
  ref: string,
  opts: { reason: string },
): Promise<void> {
  showDecision(
    deps,
    await deps
      .client()
      .post<ReviewDecision>(`/memory/review/${itemRef(ref)}/dismiss`, { reason: opts.reason }),
  )
}

export async function recallHealth(deps: Deps): Promise<void> {
  const health = await deps.client().get<RecallHealth>('/memory/recall-health')
  const counts = (c: RecallHealth['runs']) => {
    const failed = c.failed ? colour(deps.out, 'red', `${c.failed} failed`) : '0 failed'
    return `${c.attempted} tried, ${c.succeeded} succeeded, ${failed}`
  }
  show(deps.out, health, () =>
    printFields(deps.out, [
      ['since', health.since],
      ['runs', counts(health.runs)],
      ['chats', counts(health.chats)],
    ]),
  )
}

/** The task's own notes and its training grants: which layers it reads and may write. */
export async function taskMemory(deps: Deps, task: string): Promise<void> {
  const client = deps.client()
  const memory = await client.get<TaskMemory>(`/tasks/${await taskId(client, task)}/memory`)
  show(deps.out, memory, () => {
    printFields(deps.out, [
      ['task', memory.taskId],
      ['team', memory.teamId],
      ['reads', memory.grants.read.length ? memory.grants.read : null],
      ['writes', memory.grants.write.length ? memory.grants.write : null],
    ])
    deps.out.write('\n')
    printTable(deps.out, memory.notes, noteColumns)
  })
}

const layerOption = () =>
  new Option('--layer <layer>', "team (the task's team) or enterprise").choices(trainLayers)

/** `osctl tasks memory`: registered with `osctl tasks` (program.ts), which it hangs under. */
export function registerTaskMemory(tasks: Command, makeDeps: MakeDeps): void {
  const memory = tasks
    .command('memory')
    .description("a task's memory: its notes, what it may train, what it would recall")
  examples(
    memory
      .command('list')
      .argument('<task>', 'id or slug')
      .description("the task's active notes and its training grants (layers it reads and writes)")
      .action(actionOf(makeDeps, taskMemory)),
    'osctl tasks memory list nightly-report',
  )
  examples(
    memory
      .command('add')
      .argument('<task>', 'id or slug')
      .argument('<text>', 'the note, 1 to 4,000 characters ("-" reads stdin)')
      .option(
        '--corrects <note>',
        "id of one of the task's notes this corrects (superseded at once)",
      )
      .option(
        '--valid-until <time>',
        'ISO time with a zone, in the future: the note is not recalled after it',
      )
      .description("add a note at the task's own layer")
      .action(actionOf(makeDeps, addNote)),
    'osctl tasks memory add nightly-report "The EU figures arrive after 06:00 UTC"',
  )
  examples(
    memory
      .command('train')
      .argument('<task>', 'id or slug')
      .argument('<text>', 'the note, 1 to 4,000 characters ("-" reads stdin)')
      .addOption(layerOption().makeOptionMandatory())
      .option('--corrects <note>', 'id of a note of that layer this corrects (superseded at once)')
      .option(
        '--valid-until <time>',
        'ISO time with a zone, in the future: the note is not recalled after it',
      )
      .description("teach the task's team or the enterprise a note, through the task")
      .action(actionOf(makeDeps, trainTaskNote)),
    'osctl tasks memory train nightly-report "Reports go out in CET" --layer team',
    'osctl tasks memory train nightly-report "Fiscal year starts in April" --layer enterprise --corrects 5e1c7a2b-9d3f-4c8e-a1b6-0f2d4e6a8c10',
  )
  examples(
    memory
      .command('ask')
      .argument('<task>', 'id or slug')
      .argument('[question]', "the text to recall for (default: the task's goal)")
      .option('--limit <n>', 'notes to answer, 1 to 50 (default 10)')
      .description('exactly what a run of the task would recall, best first, with layer and score')
      .action(actionOf(makeDeps, askTaskMemory)),
    'osctl tasks memory ask nightly-report "when do EU figures arrive?"',
  )
}

export function registerMemory(program: Command, makeDeps: MakeDeps): void {
  const memory = program.command('memory').description(about.memory)
  examples(
    withPageOptions(
      memory
        .command('list')
        .description(
          'active notes that hold, newest first or, with --q, best match first (a misspelt word too)',
        )
        .option('--q <text>', 'search the notes')
        .addOption(new Option('--layer <layer>').choices(memoryLayers))
        .option('--task <task>', 'task id or slug')
        .option('--team <team>', 'team id or slug')
        .addOption(
          new Option('--status <status>', 'lists show active notes only').choices(noteStatuses),
        )
        .addOption(new Option('--kind <kind>').choices(noteKinds))
        .addOption(
          new Option(
            '--sort <field>',
            'createdAt (newest first, or best match with --q), impact (lift), recalls',
          ).choices(noteSorts),
        )
        .option('--expired', 'the notes past their validUntil instead (not recalled)'),
    ).action(actionOf(makeDeps, listNotes)),
    'osctl memory list --q "invoice dates" --layer team',
    'osctl memory list --task nightly-report --all --json',
    'osctl memory list --sort recalls --limit 10',
    'osctl memory list --expired',
  )
  examples(
    withPageOptions(
      memory
        .command('impact')
        .description(
          'notes by lift: how much more often the runs that recalled each succeeded than the runs of the same tasks that did not (- while either side has fewer than 5 runs)',
        )
        .addOption(new Option('--layer <layer>').choices(memoryLayers))
        .option('--task <task>', "task id or slug: that task's own notes"),
    ).action(actionOf(makeDeps, noteImpact)),
    'osctl memory impact',
    'osctl memory impact --layer enterprise --all',
    'osctl memory impact --task nightly-report --json',
  )
  examples(
    memory
      .command('get')
      .argument('<note>', 'note id')
      .description('one note with its evidence')
      .action(actionOf(makeDeps, getNote)),
    'osctl memory get 5e1c7a2b-9d3f-4c8e-a1b6-0f2d4e6a8c10',
  )
  examples(
    memory
      .command('ask')
      .argument('<question>', 'what to look for, in words')
      .option(
        '--task <task>',
        'id or slug: answer exactly what a run of this task would recall, with layer and score',
      )
      .option('--limit <n>', 'notes to answer (with --task 1 to 50, default 10)')
      .description(
        "search the enterprise's memory, every layer, best match first; with --task, what a run of that task would recall",
      )
      .action(actionOf(makeDeps, askMemory)),
    'osctl memory ask "when do EU figures arrive?"',
    'osctl memory ask "when do EU figures arrive?" --task nightly-report --json',
  )
  examples(
    memory
      .command('add')
      .argument('<task>', 'id or slug')
      .argument('<text>', 'the note, 1 to 4,000 characters ("-" reads stdin)')
      .option(
        '--corrects <note>',
        "id of one of the task's notes this corrects (superseded at once)",
      )
      .option(
        '--valid-until <time>',
        'ISO time with a zone, in the future: the note is not recalled after it',
      )
      .description("add a note at a task's own layer")
      .action(actionOf(makeDeps, addNote)),
    'osctl memory add nightly-report "The EU figures arrive after 06:00 UTC"',
    'osctl memory add nightly-report - < lesson.txt',
  )
  examples(
    memory
      .command('train')
      .addOption(
        new Option('--layer <layer>', 'team or enterprise')
          .choices(trainLayers)
          .makeOptionMandatory(),
      )
      .option('--team <team>', 'with --layer team: team id or slug')
      .option('--wait', 'follow the run to its end; exit 0 only if it succeeded')
      .option('--timeout <seconds>', 'with --wait: give up after this long (exit 8)')
      .description(
        'start a training run (os-train-memory) that learns a layer from its runs; one at a time per layer',
      )
      .action(actionOf(makeDeps, trainMemory)),
    'osctl memory train --layer team --team platform',
    'osctl memory train --layer enterprise --wait --timeout 900',
  )
  examples(
    memory
      .command('extend')
      .argument('<note>', 'note id')
      .option('--until <time>', 'ISO time with a zone, in the future')
      .option('--forever', 'the note holds with no end')
      .description('extend an active note, expired or not: it is recalled again until then')
      .action(actionOf(makeDeps, extendNote)),
    'osctl memory extend 5e1c7a2b-9d3f-4c8e-a1b6-0f2d4e6a8c10 --until 2027-06-30T00:00:00Z',
    'osctl memory extend 5e1c7a2b-9d3f-4c8e-a1b6-0f2d4e6a8c10 --forever',
  )
  examples(
    memory
      .command('tombstone')
      .argument('<note>', 'note id')
      .option('-y, --yes', 'do not ask')
      .description('never answer or recall the note again; repeating it changes nothing')
      .action(actionOf(makeDeps, tombstoneNote)),
    'osctl memory tombstone 5e1c7a2b-9d3f-4c8e-a1b6-0f2d4e6a8c10 --yes',
  )
  examples(
    memory
      .command('rate')
      .argument('<note>', 'note id')
      .addArgument(new Argument('<rating>', 'up or down').choices(['up', 'down']))
      .option('--reason <text>', 'why (goes to the review queue with a down)')
      .description('rate an active note; down puts it in the review queue')
      .action(actionOf(makeDeps, rateNote)),
    'osctl memory rate 5e1c7a2b-9d3f-4c8e-a1b6-0f2d4e6a8c10 up',
    'osctl memory rate 5e1c7a2b-9d3f-4c8e-a1b6-0f2d4e6a8c10 down --reason "out of date since May"',
  )
  examples(
    withPageOptions(
      memory
        .command('review')
        .description(
          "the review queue: open conflicts (a training run's correction) and notes rated down",
        ),
    ).action(actionOf(makeDeps, listReview)),
    'osctl memory review',
    'osctl memory review --all --json',
  )
  examples(
    withPageOptions(
      memory
        .command('history')
        .description('every review decision, newest first: who, when and why'),
    ).action(actionOf(makeDeps, reviewHistory)),
    'osctl memory history --limit 50',
  )
  examples(
    memory
      .command('resolve')
      .argument('<item>', 'review item id')
      .requiredOption('--correction <note>', 'id of a note correcting the reviewed one')
      .requiredOption('--reason <text>', 'why')
      .description('resolve a review item: the correction applies, the reviewed note is superseded')
      .action(actionOf(makeDeps, resolveItem)),
    'osctl memory resolve 9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d --correction 5e1c7a2b-9d3f-4c8e-a1b6-0f2d4e6a8c10 --reason "the new rate applies"',
  )
  examples(
    memory
      .command('dismiss')
      .argument('<item>', 'review item id')
      .requiredOption('--reason <text>', 'why')
      .description(
        "dismiss a review item: the note stands; a conflict's proposed correction is dropped",
      )
      .action(actionOf(makeDeps, dismissItem)),
    'osctl memory dismiss 9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d --reason "still true"',
  )
  examples(
    memory
      .command('health')
      .description('recalls tried, succeeded and failed in the last 24 hours, by runs and by chats')
      .action(actionOf(makeDeps, recallHealth)),
    'osctl memory health',
  )
}

import { InvalidArgumentError, Option, type Command } from 'commander'
import { gateDecisions, gateStatuses } from '../../shared/values.js'
import type { Gate, GateDecision } from '../../shared/schemas/gates.js'
import { shorten } from '../../shared/text.js'
import { actionOf, bodyWith, examples, withBodyOptions, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { deciderText } from '../decisions.js'
import { UsageError, noTokenError } from '../errors.js'
import { collect } from '../inputs.js'
import { colour, printFields, printTable, show, type Output } from '../output.js'
import { positiveInt } from '../paging.js'
import { resolveId, taskId } from '../resolve.js'
import { safeText } from '../safe-text.js'
import { drawEveryFrame, gateReviewInstead, requireTerminal } from '../tui/terminal.js'
import { about } from './about.js'

// `osctl gates` (spec: Gate; Endpoints Gates; DESIGN 9): the gates waiting for a person, and their
// decisions. `gates review` is the ink screen (cli/tui), loaded only when it runs.

type Decision = GateDecision['decision']

const gateKinds = ['tool', 'question'] as const

function columns(out: Output) {
  return [
    { header: 'ID', value: (g: Gate) => g.id },
    { header: 'TASK', value: (g: Gate) => g.taskSlug ?? (g.chatId ? `chat ${g.chatId}` : null) },
    {
      header: 'KIND',
      value: (g: Gate) => (g.kind === 'question' ? colour(out, 'yellow', g.kind) : g.kind),
    },
    { header: 'TOOL', value: (g: Gate) => toolCall(g) },
    // The run it belongs to (issue 51): whole on a pipe; on a terminal its first 8 characters, as the
    // spinner of a wait names a run, so that the tool and its argument keep their room beside the
    // gate's own id (never cut: it is what `gates decide` takes). `gates get` has the run whole.
    { header: 'RUN', value: (g: Gate) => (out.isTTY ? g.runId?.slice(0, 8) : g.runId) },
    { header: 'ASKS', value: (g: Gate) => g.summary ?? g.questions?.join(' / ') ?? null },
    { header: 'CREATED', value: (g: Gate) => g.createdAt },
  ]
}

/** The argument that says most about a call of these tools (issue 51): whom a mail goes to. */
const keyArguments: Record<string, string> = { 'os.mail_send': 'to', 'os.write_plan': 'title' }

/** Argument names that say what a call acts on, tried in order on a tool osctl does not know. */
const telling = ['to', 'recipient', 'email', 'url', 'path', 'repository', 'repo', 'branch', 'title']

/** The most a key argument (its name and value) shows in a table row; the rest is in `gates get`. */
const argumentWidth = 40

/**
 * A gate's tool with its key argument, as `gates list` shows it: "os.mail_send to=ada@example.com".
 * The key argument is the tool's own (keyArguments), else the first of `telling` it has, else its first
 * string argument (in the order the API answers). Its value is the model's text: control characters
 * escaped (safe-text.ts) before it is measured, then cut to argumentWidth on a pipe as on a terminal
 * (where the table may cut the column further).
 */
export function toolCall(gate: Pick<Gate, 'tool' | 'arguments'>): string | null {
  if (!gate.tool) return null
  const args = gate.arguments ?? {}
  const text = (key: string | undefined) =>
    key !== undefined && typeof args[key] === 'string' ? key : undefined
  const key =
    text(keyArguments[gate.tool]) ??
    telling.find((k) => text(k)) ??
    Object.keys(args).find((k) => text(k))
  if (key === undefined) return safeText(gate.tool)
  const value = args[key] as string
  // Quoted as an event line quotes (events.ts), then escaped: JSON leaves C1 and bidi controls alone.
  const shown = safeText(/\s/.test(value) || value === '' ? JSON.stringify(value) : value)
  const pair = `${safeText(key)}=${shown}`
  return `${safeText(gate.tool)} ${shorten(pair, argumentWidth)}`
}

function showGate(deps: Deps, gate: Gate): void {
  const out = deps.out
  show(out, gate, () => {
    printFields(out, [
      ['id', gate.id],
      ['kind', gate.kind],
      ['status', gate.status === 'waiting' ? colour(out, 'yellow', gate.status) : gate.status],
      ['tool', gate.tool],
      ['task', gate.taskSlug ?? gate.taskId],
      ['run', gate.runId],
      ['chat', gate.chatId],
      ['owner', gate.owner],
      ['approval', gate.approval],
      ['summary', gate.summary],
      ['questions', gate.questions?.length ? gate.questions : null],
      ['choices', gate.choices?.length ? gate.choices.map((c) => `${c.key} (${c.label})`) : null],
      ['decision', gate.decision],
      ['note', gate.note],
      ['answers', gate.answers],
      ['choice', gate.choice],
      ['decided by', deciderText(gate.decidedBy, gate.decidedByName)],
      ['decided at', gate.decidedAt],
      ['created', gate.createdAt],
    ])
    if (gate.arguments) {
      // JSON leaves C1 and the bidi controls as they are; escaped as \uXXXX it is still JSON.
      const json = safeText(JSON.stringify(gate.arguments, null, 2), { multiline: true })
      out.write(`\narguments:\n${json.replace(/^/gm, '  ')}\n`)
    }
  })
}

/** A gate by its id or a prefix of it (issue 51). */
const gateRef = (deps: Deps, ref: string) => resolveId(deps.client(), 'gate', ref)

/** `--decision request-changes` reads as request_changes. */
function parseDecision(value: string): Decision {
  const decision = value.replace(/-/g, '_') as Decision
  if (!gateDecisions.includes(decision)) {
    throw new InvalidArgumentError(`Allowed choices are ${gateDecisions.join(', ')}.`)
  }
  return decision
}

interface DecisionFlags {
  decision?: Decision
  approve?: boolean
  reject?: boolean
  requestChanges?: boolean
  note?: string
  choice?: string
  answer?: string[]
  data?: string
  file?: string
}

/**
 * The body of a decision: -d/-f with the flags laid over it. A reject or request_changes needs a note:
 * a person refusing should say why (osctl's rule; the API lets it be left out).
 */
async function decisionBody(deps: Deps, opts: DecisionFlags): Promise<GateDecision> {
  const shorthand = (
    [
      ['approve', opts.approve],
      ['reject', opts.reject],
      ['request_changes', opts.requestChanges],
    ] as const
  )
    .filter(([, set]) => set)
    .map(([decision]) => decision)
  if (shorthand.length + (opts.decision ? 1 : 0) > 1) {
    throw new UsageError(
      'give one decision: --decision D, --approve, --reject or --request-changes',
    )
  }
  const body = (await bodyWith(deps, opts, {
    decision: opts.decision ?? shorthand[0],
    note: opts.note,
    choice: opts.choice,
    answers: opts.answer?.length ? opts.answer : undefined,
  })) as GateDecision
  if (body.decision === undefined) {
    throw new UsageError('say what to decide: --decision approve|reject|request_changes')
  }
  const decision = parseDecisionOrUsage(body.decision)
  if (decision !== 'approve' && !(typeof body.note === 'string' && body.note.trim())) {
    throw new UsageError(`a ${decision} needs --note TEXT: say why`)
  }
  return { ...body, decision }
}

function parseDecisionOrUsage(value: unknown): Decision {
  try {
    return parseDecision(String(value))
  } catch (err) {
    throw new UsageError(`decision: ${(err as Error).message}`)
  }
}

async function gateFilters(
  deps: Deps,
  opts: { task?: string; run?: string; kind?: string },
): Promise<{ taskId?: string; runId?: string; kind?: string }> {
  return {
    taskId: opts.task ? await taskId(deps.client(), opts.task) : undefined,
    runId: opts.run ? await resolveId(deps.client(), 'run', opts.run) : undefined,
    kind: opts.kind,
  }
}

export async function listGates(
  deps: Deps,
  opts: {
    task?: string
    run?: string
    kind?: string
    status?: 'waiting' | 'decided'
    page?: string
    limit?: string
  },
): Promise<void> {
  // The decided gates (issue 51), for audits: newest decision first, a page at a time.
  const gates = await deps.client().get<Gate[]>('/gates', {
    ...(await gateFilters(deps, opts)),
    status: opts.status,
    page: positiveInt('--page', opts.page),
    limit: positiveInt('--limit', opts.limit),
  })
  const decided = [
    { header: 'DECISION', value: (g: Gate) => g.decision },
    { header: 'BY', value: (g: Gate) => deciderText(g.decidedBy, g.decidedByName) },
    { header: 'DECIDED', value: (g: Gate) => g.decidedAt },
  ]
  const shown = opts.status === 'decided' ? [...columns(deps.out), ...decided] : columns(deps.out)
  show(deps.out, gates, () => printTable(deps.out, gates, shown))
}

export async function getGate(deps: Deps, ref: string): Promise<void> {
  showGate(deps, await deps.client().get<Gate>(`/gates/${await gateRef(deps, ref)}`))
}

export async function decideGate(deps: Deps, ref: string, opts: DecisionFlags): Promise<void> {
  const body = await decisionBody(deps, opts)
  const id = await gateRef(deps, ref)
  showGate(deps, await deps.client().post<Gate>(`/gates/${id}/decision`, body))
}

export async function approveGate(deps: Deps, ref: string, opts: { note?: string }): Promise<void> {
  await decideGate(deps, ref, { decision: 'approve', note: opts.note })
}

export async function rejectGate(deps: Deps, ref: string, opts: { note?: string }): Promise<void> {
  await decideGate(deps, ref, { decision: 'reject', note: opts.note })
}

export async function requestChanges(
  deps: Deps,
  ref: string,
  opts: { note?: string },
): Promise<void> {
  await decideGate(deps, ref, { decision: 'request_changes', note: opts.note })
}

/**
 * Answers a question gate: approve with the answers and/or a choice. It reads the gate first, so an
 * answer never approves a tool call by mistake.
 */
export async function answerGate(
  deps: Deps,
  ref: string,
  opts: { choice?: string; answer?: string[]; note?: string },
): Promise<void> {
  if (opts.choice === undefined && !opts.answer?.length) {
    throw new UsageError('give --choice KEY and/or --answer TEXT')
  }
  const gate = await deps.client().get<Gate>(`/gates/${await gateRef(deps, ref)}`)
  if (gate.kind !== 'question') {
    throw new UsageError(
      `gate ${gate.id} is a tool gate (${gate.tool ?? 'a tool call'}), not a question: ` +
        `use osctl gates approve ${gate.id}`,
    )
  }
  await decideGate(deps, ref, { ...opts, decision: 'approve' })
}

export async function decideChat(
  deps: Deps,
  chat: string,
  opts: DecisionFlags & { gate?: string },
): Promise<void> {
  const body = {
    ...(await decisionBody(deps, opts)),
    ...(opts.gate ? { gateId: await gateRef(deps, opts.gate) } : {}),
  }
  const chatId = await resolveId(deps.client(), 'chat', chat)
  showGate(deps, await deps.client().post<Gate>(`/gates/chat/${chatId}/decision`, body))
}

/** The ink screen; off a terminal it refuses (exit 2) and names the verbs above. */
export async function reviewGates(
  deps: Deps,
  opts: { task?: string; run?: string; kind?: string },
): Promise<void> {
  requireTerminal('gates review', gateReviewInstead)
  if (deps.globals.json) {
    throw new UsageError('gates review is interactive: --json goes with gates list and gates get')
  }
  if (!deps.target().token) {
    throw noTokenError()
  }
  const filters = await gateFilters(deps, opts)
  // Loaded here, not at the top: ink and React take longer to load than the rest of osctl.
  drawEveryFrame()
  const { renderGateReview } = await import('../tui/gate-review.js')
  await renderGateReview(deps.client(), { filters })
}

function withFilters(command: Command): Command {
  return command
    .option('--task <task>', 'task id or slug')
    .option('--run <run>', 'run id, or its first 8+ characters')
    .addOption(new Option('--kind <kind>', 'tool or question').choices(gateKinds))
}

const decisionOption = () =>
  new Option('--decision <decision>', gateDecisions.join(', ')).argParser(parseDecision)

function withAnswerOptions(command: Command): Command {
  return command
    .option('--choice <key>', "the key of one of the gate's choices")
    .option('--answer <text>', 'an answer, one per question (repeat for several)', collect)
}

export function registerGates(program: Command, makeDeps: MakeDeps): void {
  const gates = program.command('gates').description(about.gates)
  examples(
    withFilters(
      gates
        .command('list')
        .description('the gates waiting, newest first; or those decided, newest decision first'),
    )
      .addOption(
        new Option('--status <status>', 'waiting (default), or decided: paged, for audits').choices(
          gateStatuses,
        ),
      )
      .option('--page <n>', 'page, from 1')
      .option('--limit <n>', 'gates per page, 1 to 200 (decided: 25 unless given)')
      .action(actionOf(makeDeps, listGates)),
    'osctl gates list',
    'osctl gates list --task nightly-report --kind question --json',
    'osctl gates list --status decided --limit 50 --page 2 --json',
  )
  examples(
    gates
      .command('get')
      .argument('<gate>', 'gate id, or its first 8+ characters')
      .description('one gate, waiting or decided, with its arguments')
      .action(actionOf(makeDeps, getGate)),
    'osctl gates get 3f2a9c4e-8b1d-4e6f-a2c3-5d7e9f1b3a60',
  )
  examples(
    gates
      .command('approve')
      .argument('<gate>', 'gate id, or its first 8+ characters')
      .option('--note <text>', 'why (optional)')
      .description('approve: the gated call goes ahead')
      .action(actionOf(makeDeps, approveGate)),
    'osctl gates approve 3f2a9c4e-8b1d-4e6f-a2c3-5d7e9f1b3a60 --note "tests pass"',
  )
  examples(
    gates
      .command('reject')
      .argument('<gate>', 'gate id, or its first 8+ characters')
      .requiredOption('--note <text>', 'why (needed)')
      .description('reject: the run is told the call was refused, with the note')
      .action(actionOf(makeDeps, rejectGate)),
    'osctl gates reject 3f2a9c4e-8b1d-4e6f-a2c3-5d7e9f1b3a60 --note "not on a Friday"',
  )
  examples(
    gates
      .command('request-changes')
      .argument('<gate>', 'gate id, or its first 8+ characters')
      .requiredOption('--note <text>', 'what to change (needed)')
      .description('request changes: the run gets the note and may propose again')
      .action(actionOf(makeDeps, requestChanges)),
    'osctl gates request-changes 3f2a9c4e-8b1d-4e6f-a2c3-5d7e9f1b3a60 --note "merge #8 instead"',
  )
  examples(
    withAnswerOptions(
      gates
        .command('answer')
        .argument('<gate>', 'gate id of a question, or its first 8+ characters')
        .option('--note <text>', 'a note for the run'),
    )
      .description('answer a question gate: a choice and/or answers (the decision is approve)')
      .action(actionOf(makeDeps, answerGate)),
    'osctl gates answer 3f2a9c4e-8b1d-4e6f-a2c3-5d7e9f1b3a60 --choice yes',
    'osctl gates answer 3f2a9c4e-8b1d-4e6f-a2c3-5d7e9f1b3a60 --answer "Next week" --answer "Ada"',
  )
  examples(
    withBodyOptions(
      withAnswerOptions(
        gates
          .command('decide')
          .argument('<gate>', 'gate id, or its first 8+ characters')
          .addOption(decisionOption())
          .option('--approve', 'same as --decision approve')
          .option('--reject', 'same as --decision reject')
          .option('--request-changes', 'same as --decision request_changes')
          .option('--note <text>', 'why (needed to reject or request changes)'),
      ),
    )
      .description('decide a gate: the general form, flags laid over a -d/-f body')
      .action(actionOf(makeDeps, decideGate)),
    'osctl gates decide 3f2a9c4e-8b1d-4e6f-a2c3-5d7e9f1b3a60 --approve',
    'osctl gates decide 3f2a9c4e-8b1d-4e6f-a2c3-5d7e9f1b3a60 --decision reject --note "too risky"',
    `osctl gates decide 3f2a9c4e-8b1d-4e6f-a2c3-5d7e9f1b3a60 -d '{"decision":"approve","choice":"yes"}'`,
  )
  examples(
    withBodyOptions(
      withAnswerOptions(
        gates
          .command('chat')
          .argument('<chat>', 'chat id, or its first 8+ characters')
          .addOption(decisionOption())
          .option('--gate <gate>', 'the gate to answer (the newest waiting one if left out)')
          .option('--note <text>', 'why (needed to reject or request changes)'),
      ),
    )
      .description('answer the question a chat waits on')
      .action(actionOf(makeDeps, decideChat)),
    'osctl gates chat 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f --decision approve --answer "Yes, go"',
  )
  examples(
    withFilters(
      gates
        .command('review')
        .description(
          'review waiting gates on an interactive screen and decide them with a key (needs a terminal)',
        ),
    ).action(actionOf(makeDeps, reviewGates)),
    'osctl gates review',
    'osctl gates review --kind question',
  )
}

import { Option, type Command } from 'commander'
import type { z } from 'zod'
import { executionSorts, executionStatuses } from '../../shared/values.js'
import type {
  Board,
  Execution,
  ExecutionCounts,
  ExecutionDetail,
} from '../../shared/schemas/executions.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { bold, colour, printFields, printTable, show, type Column } from '../output.js'
import { printPaged, withPageOptions, type PageFlags } from '../paging.js'
import { usd } from '../money.js'
import { executionId, memberId, teamId } from '../resolve.js'
import { safeText } from '../safe-text.js'
import { drawTree, type TreeNode } from '../tree.js'
import { about } from './about.js'
import { pausedWhy, statusText } from './runs.js'

type Counts = z.infer<typeof ExecutionCounts>

const columns: Column<Execution>[] = [
  { header: 'ID', value: (e) => e.id },
  { header: 'TASK', value: (e) => e.taskSlug },
  { header: 'STATUS', value: (e) => e.status },
  { header: 'RUNS', value: (e) => e.runCount },
  { header: 'LAST RUN', value: (e) => `${e.lastRun.taskSlug} ${e.lastRun.status}` },
  // On the board: why it waits (issue 50).
  { header: 'WAITS', value: (e) => (e.paused ? pausedWhy(e.paused) : ''), whenAny: true },
  { header: 'CLOSED', value: (e) => (e.closed ? 'yes' : '') },
  { header: 'UPDATED', value: (e) => e.updatedAt },
]

/** An execution by its id (or a run's), or a prefix of it (issue 51). */
const executionRef = (deps: Deps, ref: string) => executionId(deps.client(), ref)

function showExecution(deps: Deps, execution: Execution): void {
  show(deps.out, execution, () =>
    printFields(deps.out, [
      ['id', execution.id],
      ['task', execution.taskSlug],
      ['status', execution.status],
      ['closed', execution.closed ? `yes, ${execution.closedAt}` : 'no'],
      ['runs', execution.runCount],
      [
        'last run',
        `${execution.lastRun.id} (${execution.lastRun.taskSlug}, ${execution.lastRun.status})`,
      ],
      ['started', execution.startedAt],
      ['updated', execution.updatedAt],
      ['cost', usd(execution.costUsdCents)],
    ]),
  )
}

/**
 * The runs of an execution as a tree following its links (a successor started, a retry): roots are
 * the runs nothing led to, each labelled with its task slug and status.
 */
export function executionTree(deps: Deps, detail: ExecutionDetail): TreeNode[] {
  const led = new Set(detail.links.map((l) => l.to))
  const runs = new Map(detail.runs.map((r) => [r.id, r]))
  const drawn = new Set<string>()
  const node = (id: string, via?: string): TreeNode => {
    drawn.add(id)
    const run = runs.get(id)
    const label = run
      ? `${safeText(run.taskSlug)}  ${statusText(deps.out, run.status)}  ${colour(deps.out, 'dim', run.id)}`
      : String(colour(deps.out, 'dim', id))
    return {
      label:
        via === 'retry' || via === 'fork'
          ? `${label}  ${colour(deps.out, 'dim', `(${via})`)}`
          : label,
      children: detail.links
        .filter((l) => l.from === id && !drawn.has(l.to))
        .map((l) => node(l.to, l.kind)),
    }
  }
  const roots = detail.runs.filter((r) => !led.has(r.id)).map((r) => node(r.id))
  // A run only reached through a link whose source is not among the runs still gets drawn.
  for (const run of detail.runs) if (!drawn.has(run.id)) roots.push(node(run.id))
  return roots
}

export async function listExecutions(
  deps: Deps,
  opts: PageFlags & { team?: string; member?: string; status?: string; closed?: boolean },
): Promise<void> {
  const client = deps.client()
  const filters = {
    teamId: opts.team ? await teamId(client, opts.team) : undefined,
    memberId: opts.member ? await memberId(client, opts.member) : undefined,
    status: opts.status,
    closed: opts.closed ? 'true' : undefined,
  }
  await printPaged(deps, '/executions', filters, opts, columns, 'executions')
}

export async function getExecution(deps: Deps, ref: string): Promise<void> {
  const detail = await deps
    .client()
    .get<ExecutionDetail>(`/executions/${await executionRef(deps, ref)}`)
  show(deps.out, detail, () => {
    const e = detail.execution
    const heading =
      `execution ${e.id}  ${e.status}${e.closed ? ' (closed)' : ''}  ${e.runCount} run(s)` +
      (detail.archived ? '  (archived)' : '')
    deps.out.write(`${bold(deps.out, heading)}\n`)
    deps.out.write(drawTree(executionTree(deps, detail)).join('\n') + '\n')
  })
}

export async function showBoard(
  deps: Deps,
  opts: { team?: string; member?: string },
): Promise<void> {
  const client = deps.client()
  const board = await client.get<Board>('/executions/board', {
    teamId: opts.team ? await teamId(client, opts.team) : undefined,
    memberId: opts.member ? await memberId(client, opts.member) : undefined,
  })
  show(deps.out, board, () => {
    for (const lane of board.lanes) {
      const title = `${lane.lane} (${lane.executions.length})`
      deps.out.write(`${bold(deps.out, title)}\n`)
      if (lane.executions.length) printTable(deps.out, lane.executions, columns)
      deps.out.write('\n')
    }
  })
}

export async function showCounts(deps: Deps): Promise<void> {
  const counts = await deps.client().get<Counts>('/executions/counts')
  show(deps.out, counts, () =>
    printTable(
      deps.out,
      [
        { of: 'executions', ...counts.executions },
        { of: 'runs', ...counts.runs },
      ],
      [
        { header: '', value: (c) => c.of },
        { header: 'RUNNING', value: (c) => c.running },
        { header: 'QUEUED', value: (c) => c.queued },
        { header: 'WAITING', value: (c) => c.waiting },
      ],
    ),
  )
}

export async function cancelExecution(
  deps: Deps,
  ref: string,
  opts: { yes?: boolean },
): Promise<void> {
  const id = await executionRef(deps, ref)
  await confirmDestructive(deps, opts.yes, `Stop every open run of execution ${id}`)
  showExecution(deps, await deps.client().post<Execution>(`/executions/${id}/cancel`))
}

export async function closeExecution(deps: Deps, ref: string): Promise<void> {
  showExecution(
    deps,
    await deps.client().post<Execution>(`/executions/${await executionRef(deps, ref)}/close`),
  )
}

export async function reopenExecution(deps: Deps, ref: string): Promise<void> {
  showExecution(
    deps,
    await deps.client().post<Execution>(`/executions/${await executionRef(deps, ref)}/reopen`),
  )
}

export async function closeCompleted(
  deps: Deps,
  opts: { team?: string; member?: string; yes?: boolean },
): Promise<void> {
  const client = deps.client()
  const body = {
    teamId: opts.team ? await teamId(client, opts.team) : undefined,
    memberId: opts.member ? await memberId(client, opts.member) : undefined,
  }
  const scope = [opts.team && `team ${opts.team}`, opts.member && `member ${opts.member}`]
    .filter(Boolean)
    .join(', ')
  await confirmDestructive(
    deps,
    opts.yes,
    `Close every completed execution${scope ? ` of ${scope}` : ''}`,
  )
  const answer = await client.post<{ closed: number }>('/executions/close-completed', body)
  show(deps.out, answer, () => deps.out.write(`closed ${answer.closed} execution(s)\n`))
}

export function registerExecutions(program: Command, makeDeps: MakeDeps): void {
  const executions = program.command('executions').description(about.executions)
  const filters = (c: Command) =>
    c
      .option('--team <team>', 'team id or slug')
      .option('--member <member>', 'member id, email or name')
  examples(
    withPageOptions(
      filters(
        executions
          .command('list')
          .description('executions, a page at a time (--all for every one)')
          .addOption(new Option('--status <status>').choices(executionStatuses))
          .option('--closed', 'closed executions only'),
      ),
      executionSorts,
    ).action(actionOf(makeDeps, listExecutions)),
    'osctl executions list --status failed',
    'osctl executions list --team platform --sort costUsdCents --all',
  )
  examples(
    executions
      .command('get')
      .argument(
        '<id>',
        'execution id, or the id of any of its runs (or the first 8+ characters of one)',
      )
      .description('its runs drawn as a tree of what led to what')
      .action(actionOf(makeDeps, getExecution)),
    'osctl executions get 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    filters(
      executions.command('board').description('every lane of the board and its executions'),
    ).action(actionOf(makeDeps, showBoard)),
    'osctl executions board',
    'osctl executions board --team platform --json',
  )
  examples(
    executions
      .command('counts')
      .description('executions and runs running, queued and waiting')
      .action(actionOf(makeDeps, showCounts)),
    'osctl executions counts',
  )
  examples(
    executions
      .command('cancel')
      .argument('<id>', 'execution id, or its first 8+ characters')
      .option('-y, --yes', 'do not ask')
      .description('stop every open run of the execution')
      .action(actionOf(makeDeps, cancelExecution)),
    'osctl executions cancel 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --yes',
  )
  examples(
    executions
      .command('close')
      .argument('<id>', 'execution id, or its first 8+ characters')
      .description('take a finished execution off the board')
      .action(actionOf(makeDeps, closeExecution)),
    'osctl executions close 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    executions
      .command('reopen')
      .argument('<id>', 'execution id, or its first 8+ characters')
      .description('put a closed execution back on the board')
      .action(actionOf(makeDeps, reopenExecution)),
    'osctl executions reopen 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    filters(
      executions
        .command('close-completed')
        .option('-y, --yes', 'do not ask')
        .description('close every execution in the Complete lane, of a team or member if given'),
    ).action(actionOf(makeDeps, closeCompleted)),
    'osctl executions close-completed --team platform --yes',
  )
}

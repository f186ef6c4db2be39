import type { Command } from 'commander'
import type { Blockers, Run } from '../../shared/schemas/runs.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { bold, printTable, show, type Column } from '../output.js'
import { positiveInt } from '../paging.js'
import { about } from './about.js'
import { statusText } from './runs.js'

function section<T>(deps: Deps, title: string, rows: T[], columns: Column<T>[]): void {
  deps.out.write(`${bold(deps.out, title)}\n`)
  if (rows.length === 0) deps.out.write('(none)\n')
  else printTable(deps.out, rows, columns)
  deps.out.write('\n')
}

/** Everything on Blockers, section by section (spec: Endpoints Blockers). */
export async function listBlockers(
  deps: Deps,
  opts: { page?: string; pageSize?: string },
): Promise<void> {
  const blockers = await deps.client().get<Blockers>('/blockers', {
    failedPage: positiveInt('--page', opts.page),
    pageSize: positiveInt('--page-size', opts.pageSize),
  })
  show(deps.out, blockers, () => {
    const { failed } = blockers
    const runColumns: Column<Run>[] = [
      { header: 'ID', value: (r) => r.id },
      { header: 'TASK', value: (r) => r.taskSlug },
      { header: 'STATUS', value: (r) => statusText(deps.out, r.status) },
      { header: 'REASON', value: (r) => r.reason ?? r.blockedReason },
      { header: 'UPDATED', value: (r) => r.updatedAt },
    ]
    section(
      deps,
      `Failed runs (${failed.total}${failed.pages > 1 ? `, page ${failed.page} of ${failed.pages}` : ''})`,
      failed.data,
      runColumns,
    )
    section(
      deps,
      `Stopped pipelines (${blockers.stoppedPipelines.length})`,
      blockers.stoppedPipelines,
      [
        { header: 'EXECUTION', value: (p) => p.executionId },
        { header: 'RUN', value: (p) => p.run.id },
        { header: 'TASK', value: (p) => p.run.taskSlug },
        { header: 'NOT STARTED', value: (p) => p.successorsNotStarted },
      ],
    )
    section(deps, `Blocked (${blockers.blocked.length})`, blockers.blocked, runColumns)
    section(deps, `Paused on spend (${blockers.paused.length})`, blockers.paused, runColumns)
    const problems = blockers.taskProblems.flatMap((task) =>
      task.issues.map((issue) => ({ task, issue })),
    )
    section(deps, `Task problems (${blockers.taskProblems.length})`, problems, [
      { header: 'TASK', value: (p) => p.task.slug },
      { header: 'SEVERITY', value: (p) => p.issue.severity },
      { header: 'CODE', value: (p) => p.issue.code },
      { header: 'MESSAGE', value: (p) => p.issue.message },
    ])
  })
}

export async function clearBlockers(deps: Deps, opts: { yes?: boolean }): Promise<void> {
  await confirmDestructive(deps, opts.yes, 'Take every failed run off Blockers')
  const answer = await deps
    .client()
    .post<{ section: 'failed'; cleared: number }>('/blockers/clear', { section: 'failed' })
  show(deps.out, answer, () =>
    deps.out.write(`took ${answer.cleared} failed run(s) off Blockers\n`),
  )
}

export function registerBlockers(program: Command, makeDeps: MakeDeps): void {
  const blockers = program.command('blockers').description(about.blockers)
  examples(
    blockers
      .command('list', { isDefault: true })
      .description('everything on Blockers, by section; failed runs a page at a time')
      .option('--page <n>', 'page of failed runs, from 1')
      .option('--page-size <n>', 'failed runs per page')
      .action(actionOf(makeDeps, listBlockers)),
    'osctl blockers',
    'osctl blockers list --page 2 --page-size 50',
  )
  examples(
    blockers
      .command('clear')
      .option('-y, --yes', 'do not ask')
      .description('take every failed run off Blockers')
      .action(actionOf(makeDeps, clearBlockers)),
    'osctl blockers clear --yes',
  )
}

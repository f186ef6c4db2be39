import type { Command } from 'commander'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { printFields, printTable, show } from '../output.js'
import { idRef, resolveId } from '../resolve.js'
import type { Plan, PlanDetail } from '../../shared/schemas/plans.js'
import { safeText } from '../safe-text.js'
import { about } from './about.js'

// Plans (spec: Plans (planned)): what runs wrote with os.write_plan, newest first. The answer's shape is
// shared/schemas/plans.ts.

const idOf = (what: string, ref: string) => idRef(ref, `a ${what}`)

export async function listPlans(
  deps: Deps,
  opts: { status?: string; kind?: string; run?: string; chat?: string },
): Promise<void> {
  const client = deps.client()
  const plans = await client.get<Plan[]>('/plans', {
    status: opts.status,
    kind: opts.kind,
    producedByRunId: opts.run === undefined ? undefined : await resolveId(client, 'run', opts.run),
    chatSessionId: opts.chat === undefined ? undefined : await resolveId(client, 'chat', opts.chat),
  })
  show(deps.out, plans, () =>
    printTable(deps.out, plans, [
      { header: 'TITLE', value: (p) => p.title },
      { header: 'KIND', value: (p) => p.kind },
      { header: 'STATUS', value: (p) => p.status },
      { header: 'ITEMS', value: (p) => p.items.length },
      { header: 'RUN', value: (p) => p.producedByRunId },
      { header: 'CREATED', value: (p) => p.createdAt },
      { header: 'ID', value: (p) => p.id },
    ]),
  )
}

export async function getPlan(deps: Deps, ref: string): Promise<void> {
  const plan = await deps.client().get<PlanDetail>(`/plans/${idOf('plan', ref)}`)
  show(deps.out, plan, () => {
    const { out } = deps
    printFields(out, [
      ['title', plan.title],
      ['id', plan.id],
      ['kind', plan.kind],
      ['status', plan.status],
      ['run', plan.producedByRunId],
      ['chat', plan.chatSessionId],
      ['created', plan.createdAt],
    ])
    out.write('\nitems:\n')
    if (plan.items.length === 0) out.write('  (none)\n')
    plan.items.forEach((item, i) => {
      out.write(`  ${i + 1}. ${safeText(item.title)}\n`)
      if (item.detail)
        out.write(`     ${safeText(item.detail, { multiline: true }).replace(/\n/g, '\n     ')}\n`)
    })
    out.write('\ngates:\n')
    if (plan.gates.length === 0) out.write('  (none)\n')
    else
      printTable(out, plan.gates, [
        { header: 'KIND', value: (g) => g.kind },
        { header: 'TOOL', value: (g) => g.tool },
        { header: 'STATUS', value: (g) => g.status },
        { header: 'DECISION', value: (g) => g.decision },
        { header: 'ID', value: (g) => g.id },
      ])
  })
}

export function registerPlans(program: Command, makeDeps: MakeDeps): void {
  const plans = program.command('plans').description(about.plans)
  examples(
    plans
      .command('list')
      .description('plans, newest first')
      .option('--status <status>', 'only plans in this status')
      .option('--kind <kind>', 'only plans of this kind')
      .option('--run <run>', 'only plans this run wrote (run id)')
      .option('--chat <chat>', 'only plans of this chat (chat id)')
      .action(actionOf(makeDeps, listPlans)),
    'osctl plans list',
    'osctl plans list --run 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --json',
  )
  examples(
    plans
      .command('get')
      .argument('<plan>', 'plan id')
      .description('one plan: its items, the run and the gates behind it')
      .action(actionOf(makeDeps, getPlan)),
    'osctl plans get 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
}

import { Option, type Command } from 'commander'
import { spendLayers } from '../../shared/values.js'
import type { SpendLayer, SpendView } from '../../shared/schemas/spend.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { layerIdOf } from '../layers.js'
import { cost, usd } from '../money.js'
import { bold, printFields, printTable, show } from '../output.js'
import { about } from './about.js'

// Spend (spec: Endpoints Spend): daily caps in US cents on the enterprise, a team, a task or a member.
// Raising or clearing a cap, or turning limits off, queues runs paused on spend again.

function showSpend(deps: Deps, view: SpendView): void {
  show(deps.out, view, () => {
    const { out } = deps
    // The enterprise's own layer carries the enterprise's id: it says nothing more than its name.
    const where = (layer: SpendLayer, layerId: string) => (layer === 'enterprise' ? '-' : layerId)
    printFields(out, [
      ['day', `${view.day} (UTC)`],
      ['limits', view.enabled ? 'on' : 'off: caps are kept but not applied'],
    ])
    out.write(`\n${bold(out, 'Spent today')}\n`)
    if (view.today.length === 0) out.write('(nothing)\n')
    else
      printTable(out, view.today, [
        { header: 'LAYER', value: (s) => s.layer },
        { header: 'ID', value: (s) => where(s.layer, s.layerId) },
        { header: 'SPENT', value: (s) => cost(s.usdCents, s.unpriced) },
        { header: 'RUNS', value: (s) => s.runs },
      ])
    out.write(`\n${bold(out, 'Daily caps')}\n`)
    if (view.caps.length === 0) out.write('(none)\n')
    else
      printTable(out, view.caps, [
        { header: 'LAYER', value: (c) => c.layer },
        { header: 'ID', value: (c) => where(c.layer, c.layerId) },
        { header: 'CAP', value: (c) => `${usd(c.moneyCentsDay)}/day` },
        {
          header: 'SPENT',
          value: (c) => {
            const spent = view.today.find((s) => s.layer === c.layer && s.layerId === c.layerId)
            return cost(spent?.usdCents ?? 0, spent?.unpriced)
          },
        },
      ])
  })
}

export async function showSpendToday(deps: Deps): Promise<void> {
  showSpend(deps, await deps.client().get<SpendView>('/spend'))
}

interface CapFlags {
  layer: SpendLayer
  id?: string
}

function cents(value: string): number {
  const n = Number(value)
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n))
    throw new UsageError(`--cents takes a whole number of US cents; got "${value}"`)
  return n
}

/** PATCH /spend/caps after asking, if `confirm` names what is about to go. */
async function patchCap(
  deps: Deps,
  opts: CapFlags & { yes?: boolean },
  moneyCentsDay: number | null,
  confirm?: (where: string) => string,
): Promise<void> {
  const client = deps.client()
  const layerId = await layerIdOf(client, opts.layer, opts.id, '--id')
  if (confirm) {
    const where = layerId ? `${opts.layer} ${opts.id}` : 'the enterprise'
    await confirmDestructive(deps, opts.yes, confirm(where))
  }
  const body = { layer: opts.layer, layerId, moneyCentsDay }
  showSpend(deps, await client.patch<SpendView>('/spend/caps', body))
}

export async function setCap(deps: Deps, opts: CapFlags & { cents: string }): Promise<void> {
  await patchCap(deps, opts, cents(opts.cents))
}

/** A cap cleared is no cap at all: moneyCentsDay null (spec: PATCH /v1/spend/caps). */
export async function clearCap(deps: Deps, opts: CapFlags & { yes?: boolean }): Promise<void> {
  await patchCap(deps, opts, null, (where) => `Remove the daily spend cap of ${where}`)
}

export async function enableSpend(deps: Deps): Promise<void> {
  showSpend(deps, await deps.client().patch<SpendView>('/spend/enabled', { enabled: true }))
}

export async function disableSpend(deps: Deps, opts: { yes?: boolean }): Promise<void> {
  await confirmDestructive(
    deps,
    opts.yes,
    'Turn spend limits off (no cap applies; runs paused on spend are queued again)',
  )
  showSpend(deps, await deps.client().patch<SpendView>('/spend/enabled', { enabled: false }))
}

export function registerSpend(program: Command, makeDeps: MakeDeps): void {
  const spend = program.command('spend').description(about.spend)
  examples(
    spend
      .command('show', { isDefault: true })
      .description("today's spend and runs by layer, every cap, and whether limits are on")
      .action(actionOf(makeDeps, showSpendToday)),
    'osctl spend',
    'osctl spend show --json',
  )

  const layerOptions = (command: Command) =>
    command
      .addOption(
        new Option('--layer <layer>', 'what the cap is on')
          .choices(spendLayers)
          .makeOptionMandatory(),
      )
      .option(
        '--id <ref>',
        'the team, task (id or slug) or member (id, email or name); not for the enterprise',
      )
  const caps = spend.command('caps').description('daily caps in US cents')
  examples(
    layerOptions(caps.command('set'))
      .description('set a daily cap; raising it queues runs paused on spend again')
      .requiredOption('--cents <n>', 'the cap per day, in US cents')
      .action(actionOf(makeDeps, setCap)),
    'osctl spend caps set --layer enterprise --cents 50000',
    'osctl spend caps set --layer team --id research --cents 2500',
  )
  examples(
    layerOptions(caps.command('clear'))
      .description('remove a daily cap; runs paused on spend are queued again')
      .option('-y, --yes', 'do not ask')
      .action(actionOf(makeDeps, clearCap)),
    'osctl spend caps clear --layer task --id nightly-report --yes',
  )

  examples(
    spend.command('enable').description('apply the caps').action(actionOf(makeDeps, enableSpend)),
    'osctl spend enable',
  )
  examples(
    spend
      .command('disable')
      .description('stop applying the caps (they are kept); paused runs are queued again')
      .option('-y, --yes', 'do not ask')
      .action(actionOf(makeDeps, disableSpend)),
    'osctl spend disable --yes',
  )
}

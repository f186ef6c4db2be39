import { Option, type Command } from 'commander'
import type {
  EventDelivery,
  EventSubscription,
  EventSubscriptionWithSecret,
} from '../../shared/schemas/events.js'
import { deliveryStates, subscriptionFormats } from '../../shared/values.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { printFields, printTable, show } from '../output.js'
import { printPaged, withPageOptions, type PageFlags } from '../paging.js'
import { idRef } from '../resolve.js'
import { about } from './about.js'

// osctl subscriptions (issue 47): outbound webhooks, the feed's events POSTed and signed as Standard
// Webhooks ask (POST /v1/event-subscriptions and its verbs). The signing secret is printed once, when
// made or rotated, on stdout (the data) with a note on stderr that it is not shown again.

const subscriptionRef = (ref: string) => idRef(ref, 'a subscription')
const deliveryRef = (ref: string) => idRef(ref, 'a delivery')

const columns = [
  { header: 'ID', value: (s: EventSubscription) => s.id },
  { header: 'URL', value: (s: EventSubscription) => s.url },
  { header: 'TYPES', value: (s: EventSubscription) => s.types.join(',') },
  { header: 'FORMAT', value: (s: EventSubscription) => s.format },
  { header: 'STATUS', value: (s: EventSubscription) => s.status },
]

const deliveryColumns = [
  { header: 'ID', value: (d: EventDelivery) => d.id },
  { header: 'POSITION', value: (d: EventDelivery) => d.position },
  { header: 'TYPE', value: (d: EventDelivery) => d.type },
  { header: 'STATUS', value: (d: EventDelivery) => d.status },
  { header: 'ATTEMPTS', value: (d: EventDelivery) => d.attempts.length },
  {
    header: 'LAST ANSWER',
    value: (d: EventDelivery) => {
      const last = d.attempts.at(-1)
      return last && `${last.statusCode ?? 'none'} in ${last.latencyMs} ms`
    },
  },
  { header: 'NEXT', value: (d: EventDelivery) => d.nextAttemptAt },
]

function showSubscription(deps: Deps, s: EventSubscription | EventSubscriptionWithSecret): void {
  show(deps.out, s, () => {
    printFields(deps.out, [
      ['id', s.id],
      ['url', s.url],
      ['types', s.types.join(', ')],
      ['format', s.format],
      ['description', s.description],
      ['status', s.status],
      ['disabled because', s.disabledReason],
      ['secret', 'secret' in s ? s.secret : `…${s.secretHint}`],
      ['created', s.createdAt],
    ])
  })
  if ('secret' in s)
    deps.out.error('the signing secret is shown this once: keep it where the receiver reads it\n')
}

const typesOf = (types: string | undefined) =>
  types
    ?.split(',')
    .map((t) => t.trim())
    .filter(Boolean)

interface SubscriptionFlags {
  hookUrl?: string
  types?: string
  format?: string
  description?: string
}

export async function createSubscription(deps: Deps, opts: SubscriptionFlags): Promise<void> {
  if (!opts.hookUrl || !opts.types) throw new UsageError('--hook-url and --types are needed')
  const made = await deps.client().post<EventSubscriptionWithSecret>('/event-subscriptions', {
    url: opts.hookUrl,
    types: typesOf(opts.types),
    format: opts.format,
    description: opts.description,
  })
  showSubscription(deps, made)
}

export async function listSubscriptions(deps: Deps): Promise<void> {
  const rows = await deps.client().get<EventSubscription[]>('/event-subscriptions')
  show(deps.out, rows, () => printTable(deps.out, rows, columns))
}

export async function getSubscription(deps: Deps, ref: string): Promise<void> {
  const id = subscriptionRef(ref)
  showSubscription(deps, await deps.client().get<EventSubscription>(`/event-subscriptions/${id}`))
}

export async function updateSubscription(
  deps: Deps,
  ref: string,
  opts: SubscriptionFlags & { enable?: boolean; disable?: boolean },
): Promise<void> {
  if (opts.enable && opts.disable) throw new UsageError('give --enable or --disable, not both')
  const body = Object.fromEntries(
    Object.entries({
      url: opts.hookUrl,
      types: typesOf(opts.types),
      format: opts.format,
      description: opts.description,
      status: opts.enable ? 'enabled' : opts.disable ? 'disabled' : undefined,
    }).filter(([, v]) => v !== undefined),
  )
  if (Object.keys(body).length === 0) throw new UsageError('nothing to change: see --help')
  const id = subscriptionRef(ref)
  showSubscription(
    deps,
    await deps.client().patch<EventSubscription>(`/event-subscriptions/${id}`, body),
  )
}

export async function deleteSubscription(
  deps: Deps,
  ref: string,
  opts: { yes?: boolean },
): Promise<void> {
  const id = subscriptionRef(ref)
  await confirmDestructive(deps, opts.yes, `delete subscription ${id} and its deliveries`)
  await deps.client().delete(`/event-subscriptions/${id}`)
  deps.out.error(`deleted subscription ${id}\n`)
}

export async function rotateSecret(
  deps: Deps,
  ref: string,
  opts: { yes?: boolean },
): Promise<void> {
  const id = subscriptionRef(ref)
  await confirmDestructive(
    deps,
    opts.yes,
    `rotate the secret of subscription ${id} (the old one signs nothing from now on)`,
  )
  showSubscription(
    deps,
    await deps
      .client()
      .post<EventSubscriptionWithSecret>(`/event-subscriptions/${id}/rotate-secret`),
  )
}

export async function listDeliveries(
  deps: Deps,
  ref: string,
  opts: PageFlags & { status?: string },
): Promise<void> {
  const id = subscriptionRef(ref)
  await printPaged(
    deps,
    `/event-subscriptions/${id}/deliveries`,
    { status: opts.status },
    opts,
    deliveryColumns,
    'deliveries',
  )
}

export async function retryDelivery(deps: Deps, ref: string, delivery: string): Promise<void> {
  const id = subscriptionRef(ref)
  const sent = await deps
    .client()
    .post<EventDelivery>(`/event-subscriptions/${id}/deliveries/${deliveryRef(delivery)}/retry`)
  show(deps.out, sent, () =>
    deps.out.write(`delivery ${sent.id} (position ${sent.position}) is sent again now\n`),
  )
}

function withSubscriptionOptions(command: Command): Command {
  return (
    command
      // Not --url: osctl's own (the daemon's address) is read anywhere on the line.
      .option('--hook-url <url>', 'where to POST: http or https, reachable under the egress rule')
      .option('--types <types>', 'comma-separated types or families: run.failed,gate.*')
      .addOption(
        new Option('--format <format>', 'standard (default) or slack').choices(subscriptionFormats),
      )
      .option('--description <text>', 'what it is for')
  )
}

export function registerSubscriptions(program: Command, makeDeps: MakeDeps): void {
  const subscriptions = program.command('subscriptions').description(about.subscriptions)
  examples(
    withSubscriptionOptions(
      subscriptions
        .command('create')
        .description('subscribe a URL to events; prints the signing secret once'),
    ).action(actionOf(makeDeps, createSubscription)),
    'osctl subscriptions create --hook-url https://hooks.example.com/osd --types run.failed,gate.waiting',
    'osctl subscriptions create --hook-url https://hooks.slack.com/services/T/B/X --types gate.waiting --format slack',
  )
  examples(
    subscriptions
      .command('list')
      .description("the enterprise's subscriptions")
      .action(actionOf(makeDeps, listSubscriptions)),
    'osctl subscriptions list --json',
  )
  examples(
    subscriptions
      .command('get')
      .argument('<id>', 'subscription id')
      .description('one subscription (its secret is never shown again)')
      .action(actionOf(makeDeps, getSubscription)),
    'osctl subscriptions get 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    withSubscriptionOptions(
      subscriptions
        .command('update')
        .argument('<id>', 'subscription id')
        .option('--enable', 'send again (what is pending goes first)')
        .option('--disable', 'stop sending'),
    )
      .description('change its url, types, format or description; enable or disable it')
      .action(actionOf(makeDeps, updateSubscription)),
    'osctl subscriptions update 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --enable',
  )
  examples(
    subscriptions
      .command('delete')
      .argument('<id>', 'subscription id')
      .option('-y, --yes', 'do not ask')
      .description('delete it and its deliveries')
      .action(actionOf(makeDeps, deleteSubscription)),
    'osctl subscriptions delete 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --yes',
  )
  examples(
    subscriptions
      .command('rotate-secret')
      .argument('<id>', 'subscription id')
      .option('-y, --yes', 'do not ask')
      .description('a new signing secret, printed once; the old one signs nothing from now on')
      .action(actionOf(makeDeps, rotateSecret)),
    'osctl subscriptions rotate-secret 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --yes',
  )
  examples(
    withPageOptions(
      subscriptions
        .command('deliveries')
        .argument('<id>', 'subscription id')
        .addOption(new Option('--status <status>').choices(deliveryStates))
        .description('its deliveries, newest first, with each attempt'),
    ).action(actionOf(makeDeps, listDeliveries)),
    'osctl subscriptions deliveries 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --status failed',
  )
  examples(
    subscriptions
      .command('retry')
      .argument('<id>', 'subscription id')
      .argument('<delivery>', 'delivery id')
      .description('send a delivery again now, with the same webhook-id')
      .action(actionOf(makeDeps, retryDelivery)),
    'osctl subscriptions retry 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f',
  )
}

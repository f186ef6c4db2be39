import { randomBytes } from 'node:crypto'
import { Option, type Command } from 'commander'
import { deliveryKinds, deliveryStatuses, webhookSorts } from '../../shared/values.js'
import type { WebhookDelivery } from '../../shared/schemas/webhooks.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { printFields, show } from '../output.js'
import { printPaged, withPageOptions, type PageFlags } from '../paging.js'
import { idRef } from '../resolve.js'
import { about } from './about.js'

/** A replay's idempotencyKey (spec: Limits): 16 to 64 letters, digits, hyphens or underscores. */
const replayKey = /^[A-Za-z0-9_-]{16,64}$/

/** A fresh key of 32 such characters (24 random bytes in base64url). */
export function newReplayKey(): string {
  return randomBytes(24).toString('base64url')
}

const columns = [
  { header: 'ID', value: (d: WebhookDelivery) => d.id },
  { header: 'KIND', value: (d: WebhookDelivery) => d.kind },
  { header: 'TARGET', value: (d: WebhookDelivery) => d.target },
  { header: 'STATUS', value: (d: WebhookDelivery) => d.status },
  { header: 'ANSWER', value: (d: WebhookDelivery) => d.response?.status },
  { header: 'RECEIVED', value: (d: WebhookDelivery) => d.receivedAt },
  { header: 'REPLAY OF', value: (d: WebhookDelivery) => d.replayOf },
]

const deliveryRef = (ref: string) => idRef(ref, 'a delivery')

function showDelivery(deps: Deps, delivery: WebhookDelivery): void {
  show(deps.out, delivery, () =>
    printFields(deps.out, [
      ['id', delivery.id],
      ['kind', delivery.kind],
      ['target', delivery.target],
      ['status', delivery.status],
      ['authenticated', delivery.authenticated ? 'yes' : 'no'],
      ['request', `${delivery.request.method} ${delivery.request.path}`],
      ['body', delivery.request.body],
      [
        'answer',
        delivery.response &&
          `${delivery.response.status} ${JSON.stringify(delivery.response.body)}`,
      ],
      ['duration', delivery.durationMs === null ? null : `${delivery.durationMs} ms`],
      ['run', delivery.runId],
      ['execution', delivery.executionId],
      ['gate', delivery.gateId],
      ['replay of', delivery.replayOf],
      ['replayable', delivery.replayable ? 'yes' : 'no'],
      ['received', delivery.receivedAt],
      ['finished', delivery.finishedAt],
    ]),
  )
}

export async function listDeliveries(
  deps: Deps,
  opts: PageFlags & { status?: string; kind?: string },
): Promise<void> {
  await printPaged(
    deps,
    '/webhooks',
    { status: opts.status, kind: opts.kind },
    opts,
    columns,
    'deliveries',
  )
}

export async function getDelivery(deps: Deps, ref: string): Promise<void> {
  showDelivery(deps, await deps.client().get<WebhookDelivery>(`/webhooks/${deliveryRef(ref)}`))
}

/**
 * Replays a delivery as a new one linked to it. The same key on the same delivery answers the same
 * replay, so a replay whose answer was lost can be repeated safely: the key used is printed on stderr.
 */
export async function replayDelivery(
  deps: Deps,
  ref: string,
  opts: { key?: string },
): Promise<void> {
  const id = deliveryRef(ref)
  if (opts.key !== undefined && !replayKey.test(opts.key))
    throw new UsageError('--key takes 16 to 64 letters, digits, hyphens or underscores')
  const key = opts.key ?? newReplayKey()
  if (opts.key === undefined)
    deps.out.error(`idempotency key ${key} (repeat with --key ${key} to get the same replay)\n`)
  const replay = await deps
    .client()
    .post<WebhookDelivery>(`/webhooks/${id}/replay`, { idempotencyKey: key })
  showDelivery(deps, replay)
}

export function registerWebhooks(program: Command, makeDeps: MakeDeps): void {
  const webhooks = program.command('webhooks').description(about.webhooks)
  examples(
    withPageOptions(
      webhooks
        .command('list')
        .description('deliveries, newest first, a page at a time (--all for every one)')
        .addOption(new Option('--status <status>').choices(deliveryStatuses))
        .addOption(new Option('--kind <kind>').choices(deliveryKinds)),
      webhookSorts,
    ).action(actionOf(makeDeps, listDeliveries)),
    'osctl webhooks list --status refused',
    'osctl webhooks list --kind task --all --json',
  )
  examples(
    webhooks
      .command('get')
      .argument('<id>', 'delivery id')
      .description('one delivery: request, answer and what followed')
      .action(actionOf(makeDeps, getDelivery)),
    'osctl webhooks get 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    webhooks
      .command('replay')
      .argument('<id>', 'delivery id')
      .option('--key <key>', 'idempotency key, 16 to 64 of A-Z a-z 0-9 - _ (default: a new one)')
      .description('apply a delivery again through the current rules, as a new delivery')
      .action(actionOf(makeDeps, replayDelivery)),
    'osctl webhooks replay 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
    'osctl webhooks replay 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --key nightly-2026-11-22-retry',
  )
}

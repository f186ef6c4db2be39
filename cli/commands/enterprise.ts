import { readFile } from 'node:fs/promises'
import type { Command } from 'commander'
import type {
  EnterpriseOverview,
  WebhookSecretInfo,
  WebhookSecretRotated,
} from '../../shared/schemas/enterprise.js'
import type { EnterprisePause } from '../../shared/schemas/pauses.js'
import type { RetentionSettings } from '../../shared/schemas/retention.js'
import { durationProblem } from '../../shared/durations.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { printFields, show } from '../output.js'
import { about } from './about.js'
import { pauseText } from './tasks.js'

export async function showEnterprise(deps: Deps): Promise<void> {
  const overview = await deps.client().get<EnterpriseOverview>('/enterprise')
  show(deps.out, overview, () =>
    printFields(deps.out, [
      ['enterprise', overview.enterprise.name],
      ['slug', overview.enterprise.slug],
      ['id', overview.enterprise.id],
      ['paused', pauseText(overview.paused)],
    ]),
  )
}

/** Pauses every task and chat of the enterprise (issue 50). */
export async function pauseEnterprise(deps: Deps, opts: { reason: string }): Promise<void> {
  const answer = await deps
    .client()
    .post<EnterprisePause>('/enterprise/pause', { reason: opts.reason })
  show(deps.out, answer, () => deps.out.write(`enterprise paused: ${pauseText(answer.paused)}\n`))
}

/** Ends the enterprise's pause: runs go on in their order, chats get their replies. */
export async function resumeEnterprise(deps: Deps, opts: { reason?: string }): Promise<void> {
  const answer = await deps
    .client()
    .post<EnterprisePause>('/enterprise/resume', { reason: opts.reason })
  show(deps.out, answer, () => deps.out.write('enterprise resumed\n'))
}

export async function showWebhookSecret(deps: Deps): Promise<void> {
  const info = await deps.client().get<WebhookSecretInfo>('/enterprise/webhook-secret')
  show(deps.out, info, () =>
    printFields(deps.out, [
      ['secret', `…${info.lastChars}`],
      ['since', info.since],
      [
        'rotated',
        info.rotated ? 'yes' : 'no: the initial secret is never shown; rotate to use webhooks',
      ],
    ]),
  )
}

export async function rotateWebhookSecret(deps: Deps, opts: { yes?: boolean }): Promise<void> {
  await confirmDestructive(
    deps,
    opts.yes,
    'Rotate the webhook secret (the current one stops working at once)',
  )
  const rotated = await deps
    .client()
    .post<WebhookSecretRotated>('/enterprise/webhook-secret/rotate')
  show(deps.out, rotated, () => {
    deps.out.error('new webhook secret (shown once; the old one no longer works):\n')
    deps.out.write(rotated.secret + '\n')
  })
}

const imageTypes: [Buffer, string][] = [
  [Buffer.from([0x89, 0x50, 0x4e, 0x47]), 'image/png'],
  [Buffer.from([0xff, 0xd8, 0xff]), 'image/jpeg'],
  [Buffer.from('GIF8'), 'image/gif'],
  [Buffer.from('RIFF'), 'image/webp'],
]

/** A file as a data: URL, its type read from its first bytes. */
export async function imageDataUrl(file: string): Promise<string> {
  const bytes = await readFile(file).catch((err: NodeJS.ErrnoException) => {
    throw new UsageError(`cannot read ${file}: ${err.code ?? err.message}`)
  })
  const type = imageTypes.find(([magic]) => bytes.subarray(0, magic.length).equals(magic))?.[1]
  if (!type) throw new UsageError(`${file} is not a png, jpeg, gif or webp image`)
  return `data:${type};base64,${bytes.toString('base64')}`
}

export async function setAvatar(deps: Deps, file: string): Promise<void> {
  const answer = await deps
    .client()
    .put('/enterprise/avatar', { dataUrl: await imageDataUrl(file) })
  show(deps.out, answer, () => deps.out.write('picture set\n'))
}

export async function clearAvatar(deps: Deps, opts: { yes?: boolean }): Promise<void> {
  await confirmDestructive(deps, opts.yes, "Remove the enterprise's picture")
  await deps.client().delete('/enterprise/avatar')
  show(deps.out, {}, () => deps.out.write('picture removed\n'))
}

/** One setting: `get` reads it, `set VALUE` writes it; both print the value in force. */
interface Setting {
  name: string
  path: string
  field: string
  description: string
  parse: (values: string[]) => unknown
  example: string
}

const settings: Setting[] = [
  {
    name: 'concurrency',
    path: '/enterprise/concurrency',
    field: 'concurrentRunLimit',
    description: 'how many runs of the enterprise may run at once',
    parse: ([v]) => {
      const n = Number(v)
      if (!Number.isInteger(n)) throw new UsageError(`expected a whole number; got "${v}"`)
      return n
    },
    example: '8',
  },
  {
    name: 'chat-model-tier',
    path: '/enterprise/chat-model-tier',
    field: 'chatModelTier',
    description: 'the model tier chats use (economical, mid, frontier)',
    parse: ([v]) => v,
    example: 'mid',
  },
  {
    name: 'chat-memory-depth',
    path: '/enterprise/chat-memory-depth',
    field: 'chatMemoryDepth',
    description: 'how much memory chats read',
    parse: ([v]) => v,
    example: 'large',
  },
  {
    name: 'metrics',
    path: '/enterprise/metrics',
    field: 'metrics',
    description: "the enterprise's metrics",
    parse: (values) => values,
    example: '"revenue" "tickets closed"',
  },
]

async function getSetting(deps: Deps, setting: Setting): Promise<void> {
  const answer = await deps.client().get<Record<string, unknown>>(setting.path)
  show(deps.out, answer, () => printFields(deps.out, Object.entries(answer)))
}

async function setSetting(deps: Deps, setting: Setting, values: string[]): Promise<void> {
  const answer = await deps
    .client()
    .patch<Record<string, unknown>>(setting.path, { [setting.field]: setting.parse(values) })
  show(deps.out, answer, () => printFields(deps.out, Object.entries(answer)))
}

// --- retention (issue 46) -----------------------------------------------------------------------

const forever = (window: string | null) => window ?? 'for ever'

function printRetention(deps: Deps, settings: RetentionSettings): void {
  show(deps.out, settings, () =>
    printFields(deps.out, [
      ['finished runs', forever(settings.finishedRuns)],
      ['closed chats', forever(settings.closedChats)],
      [
        'webhook deliveries',
        `${forever(settings.webhookDeliveries)} (of calls that never authenticated: 3 days)`,
      ],
      [
        'archive',
        settings.archive ? 'on: what leaves can still be read' : 'off: what leaves is deleted',
      ],
    ]),
  )
}

export async function showRetention(deps: Deps): Promise<void> {
  printRetention(deps, await deps.client().get<RetentionSettings>('/enterprise/retention'))
}

export interface RetentionFlags {
  finishedRuns?: string
  closedChats?: string
  webhookDeliveries?: string
  archive?: string
}

/** A window as typed: an ISO 8601 duration, or `forever` (null). */
function windowOf(flag: string, value: string): string | null {
  if (/^(for ?ever|never|null|off)$/i.test(value.trim())) return null
  const problem = durationProblem(value.trim())
  if (problem)
    throw new UsageError(`${flag}: ${problem.replace(', or null for ever', ', or forever')}`)
  return value.trim()
}

export async function setRetention(deps: Deps, opts: RetentionFlags): Promise<void> {
  const body: Record<string, string | boolean | null> = {}
  if (opts.finishedRuns !== undefined)
    body.finishedRuns = windowOf('--finished-runs', opts.finishedRuns)
  if (opts.closedChats !== undefined)
    body.closedChats = windowOf('--closed-chats', opts.closedChats)
  if (opts.webhookDeliveries !== undefined)
    body.webhookDeliveries = windowOf('--webhook-deliveries', opts.webhookDeliveries)
  if (opts.archive !== undefined) {
    const archive = opts.archive.trim().toLowerCase()
    if (!['on', 'off', 'true', 'false'].includes(archive))
      throw new UsageError(`--archive: on or off; got "${opts.archive}"`)
    body.archive = archive === 'on' || archive === 'true'
  }
  if (Object.keys(body).length === 0)
    throw new UsageError(
      'say what to change: --finished-runs, --closed-chats, --webhook-deliveries or --archive',
    )
  printRetention(deps, await deps.client().patch<RetentionSettings>('/enterprise/retention', body))
}

function registerRetention(enterprise: Command, makeDeps: MakeDeps): void {
  const retention = enterprise
    .command('retention')
    .description(
      'how long finished runs, closed chats and webhook deliveries stay live, and whether they are archived',
    )
  examples(
    retention
      .command('get', { isDefault: true })
      .description('the windows and the archive switch')
      .action(actionOf(makeDeps, showRetention)),
    'osctl enterprise retention get',
  )
  examples(
    retention
      .command('set')
      .description(
        'change windows (ISO 8601 durations such as P90D, PT12H, P1Y; forever keeps for ever) or the archive',
      )
      .option('--finished-runs <duration>', 'how long an execution stays once its last run ended')
      .option('--closed-chats <duration>', 'how long a chat stays once closed')
      .option('--webhook-deliveries <duration>', 'how long a webhook delivery stays')
      .option('--archive <on|off>', 'on: what leaves is archived and still read; off: deleted')
      .action(actionOf(makeDeps, setRetention)),
    'osctl enterprise retention set --finished-runs P30D --closed-chats forever',
    'osctl enterprise retention set --archive off',
  )
}

function registerWebhookSecret(parent: Command, makeDeps: MakeDeps, prefix: string): void {
  const secret = parent.command('webhook-secret').description(about['webhook-secret'])
  examples(
    secret
      .command('show', { isDefault: true })
      .description('last characters and since when')
      .action(actionOf(makeDeps, showWebhookSecret)),
    `${prefix} webhook-secret show`,
  )
  examples(
    secret
      .command('rotate')
      .description('make a new secret, shown once; the old one stops at once')
      .option('-y, --yes', 'do not ask')
      .action(actionOf(makeDeps, rotateWebhookSecret)),
    `${prefix} webhook-secret rotate --yes`,
  )
}

export function registerEnterprise(program: Command, makeDeps: MakeDeps): void {
  const enterprise = program.command('enterprise').description(about.enterprise)
  examples(
    enterprise
      .command('show')
      .description('the enterprise this token acts for')
      .action(actionOf(makeDeps, showEnterprise)),
    'osctl enterprise show',
  )
  examples(
    enterprise
      .command('pause')
      .requiredOption('--reason <text>', 'why: kept with the pause and told in the event feed')
      .description(
        'pause every task and chat: starts and messages wait, runs under way stop after their current step, until resume',
      )
      .action(actionOf(makeDeps, pauseEnterprise)),
    'osctl enterprise pause --reason "provider outage"',
  )
  examples(
    enterprise
      .command('resume')
      .option('--reason <text>', 'why, if you want it on record')
      .description(
        "end the enterprise's pause: waiting runs go on in their order, chats get their replies",
      )
      .action(actionOf(makeDeps, resumeEnterprise)),
    'osctl enterprise resume',
  )
  registerWebhookSecret(enterprise, makeDeps, 'osctl enterprise')
  registerRetention(enterprise, makeDeps)

  const avatar = enterprise.command('avatar').description("the enterprise's picture")
  examples(
    avatar
      .command('set')
      .argument('<file>', 'png, jpeg, gif or webp')
      .description('set the picture')
      .action(actionOf(makeDeps, setAvatar)),
    'osctl enterprise avatar set logo.png',
  )
  examples(
    avatar
      .command('clear')
      .option('-y, --yes', 'do not ask')
      .description('remove the picture')
      .action(actionOf(makeDeps, clearAvatar)),
    'osctl enterprise avatar clear --yes',
  )

  for (const setting of settings) {
    const group = enterprise.command(setting.name).description(setting.description)
    examples(
      group
        .command('get', { isDefault: true })
        .description(`read ${setting.field}`)
        .action(actionOf(makeDeps, (deps) => getSetting(deps, setting))),
      `osctl enterprise ${setting.name} get`,
    )
    examples(
      group
        .command('set')
        .argument(setting.name === 'metrics' ? '<values...>' : '<value>')
        .description(`set ${setting.field}`)
        .action(
          actionOf(makeDeps, (deps, value: string | string[]) =>
            setSetting(deps, setting, Array.isArray(value) ? value : [value]),
          ),
        ),
      `osctl enterprise ${setting.name} set ${setting.example}`,
    )
  }
}

/** `osctl webhook-secret ...`, the same verbs at the top level (the runs issue names them there). */
export function registerTopLevelWebhookSecret(program: Command, makeDeps: MakeDeps): void {
  registerWebhookSecret(program, makeDeps, 'osctl')
}

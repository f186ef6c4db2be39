import { Option, type Command } from 'commander'
import type { z } from 'zod'
import { llmLayers, modelTiers, providers } from '../../shared/values.js'
import type {
  LlmBinding,
  LlmConnection,
  LlmLayer,
  LlmModels,
  LlmPrice,
  LlmPrices,
  LlmUsage,
  OAuthStarted,
  Tiers,
} from '../../shared/schemas/models.js'
import {
  actionOf,
  bodyWith,
  confirmDestructive,
  examples,
  withBodyOptions,
  type MakeDeps,
} from '../command.js'
import type { ApiClient } from '../client.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { layerIdOf, layerText, teamOrMember } from '../layers.js'
import { cost, usdFromDollars } from '../money.js'
import { printFields, printTable, show } from '../output.js'
import { idRef } from '../resolve.js'
import { readSecret } from '../secrets.js'
import { about } from './about.js'

// Model connections, keys, tiers and models (spec: Endpoints Models). The API never answers a key, only
// its last characters (keyHint); osctl never prints one either.

type Usage = z.infer<typeof LlmUsage>
type TierTable = z.infer<typeof Tiers>
type Models = z.infer<typeof LlmModels>
type Started = z.infer<typeof OAuthStarted>

const connectionRef = (ref: string) => idRef(ref, 'a model connection')

const connectionColumns = [
  { header: 'NAME', value: (c: LlmConnection) => c.name },
  { header: 'PROVIDER', value: (c: LlmConnection) => c.provider },
  { header: 'KIND', value: (c: LlmConnection) => c.kind },
  { header: 'LAYER', value: (c: LlmConnection) => c.layer },
  { header: 'LAYER ID', value: (c: LlmConnection) => c.layerId },
  { header: 'PLAN', value: (c: LlmConnection) => c.plan },
  { header: 'KEY', value: (c: LlmConnection) => c.keyHint },
  { header: 'ID', value: (c: LlmConnection) => c.id },
]

function showConnection(deps: Deps, connection: LlmConnection): void {
  show(deps.out, connection, () =>
    printFields(deps.out, [
      ['name', connection.name],
      ['id', connection.id],
      ['provider', connection.provider],
      ['kind', connection.kind === 'api_key' ? 'API key' : 'subscription sign-in'],
      ['layer', layerText(connection.layer, connection.layerId)],
      ['description', connection.description || '-'],
      ['plan', connection.plan],
      ['key', connection.keyHint],
      ['updated', connection.updatedAt],
    ]),
  )
}

export async function listConnections(deps: Deps): Promise<void> {
  const connections = await deps.client().get<LlmConnection[]>('/llm/connections')
  show(deps.out, connections, () => printTable(deps.out, connections, connectionColumns))
}

export async function updateConnection(
  deps: Deps,
  ref: string,
  opts: { name?: string; description?: string; plan?: string; data?: string; file?: string },
): Promise<void> {
  const id = connectionRef(ref)
  const body = await bodyWith(deps, opts, {
    name: opts.name,
    description: opts.description,
    plan: opts.plan,
  })
  showConnection(deps, await deps.client().patch<LlmConnection>(`/llm/connections/${id}`, body))
}

export async function connectionUsage(deps: Deps, ref: string): Promise<void> {
  const usage = await deps.client().get<Usage>(`/llm/connections/${connectionRef(ref)}/usage`)
  show(deps.out, usage, () =>
    printTable(deps.out, usage.days, [
      { header: 'DAY', value: (d) => d.day },
      { header: 'MODEL', value: (d) => d.model },
      { header: 'CALLS', value: (d) => d.calls },
      // Each kind of token once, as the provider bills it: the input at full price, then the cache's.
      { header: 'INPUT TOKENS', value: (d) => d.inputTokens },
      { header: 'CACHE READ', value: (d) => d.cacheReadTokens },
      { header: 'CACHE WRITE', value: (d) => d.cacheWriteTokens },
      { header: 'OUTPUT TOKENS', value: (d) => d.outputTokens },
      { header: 'COST', value: (d) => cost(d.costUsdCents, d.unpriced) },
    ]),
  )
}

interface BindingFlags {
  provider?: string
  layer?: LlmLayer
  layerId?: string
  team?: string
  member?: string
}

/** The layer a bindings verb names: --team, --member, or --layer with --layer-id, one of them. */
async function bindingLayer(
  client: ApiClient,
  opts: BindingFlags,
): Promise<{ layer?: LlmLayer; layerId?: string }> {
  const byLayer = opts.layer !== undefined || opts.layerId !== undefined
  if ([byLayer, opts.team !== undefined, opts.member !== undefined].filter(Boolean).length > 1)
    throw new UsageError('give one of --layer (with --layer-id), --team or --member')
  if (!byLayer) return opts.team || opts.member ? teamOrMember(client, opts) : {}
  if (opts.layer === undefined) throw new UsageError('--layer-id goes with --layer')
  const layerId =
    opts.layerId === undefined
      ? undefined
      : await layerIdOf(client, opts.layer, opts.layerId, '--layer-id')
  return { layer: opts.layer, layerId }
}

const bindingColumns = [
  { header: 'PROVIDER', value: (b: LlmBinding) => b.provider },
  { header: 'LAYER', value: (b: LlmBinding) => b.layer },
  { header: 'LAYER ID', value: (b: LlmBinding) => b.layerId },
  { header: 'KEY', value: (b: LlmBinding) => b.keyHint },
  { header: 'CREATED', value: (b: LlmBinding) => b.createdAt },
  { header: 'ID', value: (b: LlmBinding) => b.id },
]

export async function listBindings(deps: Deps, opts: BindingFlags): Promise<void> {
  const client = deps.client()
  const layer = await bindingLayer(client, opts)
  const bindings = await client.get<LlmBinding[]>('/llm/bindings', {
    provider: opts.provider,
    ...layer,
  })
  show(deps.out, bindings, () => printTable(deps.out, bindings, bindingColumns))
}

export async function setBinding(
  deps: Deps,
  opts: BindingFlags & { key?: string; keyStdin?: boolean },
): Promise<void> {
  const apiKey = await readSecret(
    deps,
    { value: opts.key, stdin: opts.keyStdin },
    { value: '--key', stdin: '--key-stdin' },
  )
  if (apiKey === undefined) throw new UsageError('give the key with --key-stdin (or --key KEY)')
  const client = deps.client()
  const layer = await teamOrMember(client, opts)
  const binding = await client.post<LlmBinding>('/llm/bindings', {
    apiKey,
    provider: opts.provider,
    ...layer,
  })
  show(deps.out, binding, () =>
    deps.out.write(
      `${binding.provider} key ${binding.keyHint} connected on ${layerText(binding.layer, opts.team ?? opts.member)}\n`,
    ),
  )
}

export async function removeBinding(
  deps: Deps,
  opts: BindingFlags & { yes?: boolean },
): Promise<void> {
  const client = deps.client()
  const layer = await teamOrMember(client, opts)
  const provider = opts.provider ?? 'provider_a'
  const where = layerText(layer.layer, opts.team ?? opts.member)
  await confirmDestructive(deps, opts.yes, `Remove the ${provider} key of ${where}`)
  await client.delete('/llm/bindings', { provider, ...layer })
  show(deps.out, { removed: { provider, ...layer } }, () =>
    deps.out.write(`${provider} key of ${where} removed\n`),
  )
}

function showTiers(deps: Deps, answer: TierTable): void {
  const rows = Object.entries(answer.tiers).flatMap(([provider, tiers]) =>
    Object.entries(tiers).map(([tier, { model, overridden }]) => ({
      provider,
      tier,
      model,
      overridden,
    })),
  )
  show(deps.out, answer, () =>
    printTable(deps.out, rows, [
      { header: 'PROVIDER', value: (r) => r.provider },
      { header: 'TIER', value: (r) => r.tier },
      { header: 'MODEL', value: (r) => r.model, id: true },
      { header: 'OVERRIDDEN', value: (r) => (r.overridden ? 'yes' : '') },
    ]),
  )
}

export async function listTiers(deps: Deps): Promise<void> {
  showTiers(deps, await deps.client().get<TierTable>('/llm/tiers'))
}

export async function overrideTier(
  deps: Deps,
  opts: { provider: string; tier: string; model: string },
): Promise<void> {
  const body = { provider: opts.provider, tier: opts.tier, model: opts.model }
  showTiers(deps, await deps.client().post<TierTable>('/llm/tiers/override', body))
}

export async function listModels(deps: Deps): Promise<void> {
  const answer = await deps.client().get<Models>('/llm/models')
  show(deps.out, answer, () =>
    printTable(deps.out, answer.models, [
      { header: 'PROVIDER', value: (m) => m.provider },
      { header: 'MODEL', value: (m) => m.id, id: true },
      {
        header: 'FROM',
        value: (m) => (m.source === 'provider' ? 'provider' : 'shipped catalogue'),
      },
    ]),
  )
}

/** Dollars per million tokens in osctl's one format: $3.00, $0.15, $0.00; - for the provider's ratio. */
const perMillion = (usd: number | null) => (usd === null ? '-' : usdFromDollars(usd))

export async function listPrices(deps: Deps): Promise<void> {
  const answer = await deps.client().get<LlmPrices>('/llm/prices')
  show(deps.out, answer, () => {
    printTable(deps.out, answer.prices, [
      { header: 'MODEL', value: (p) => p.model, id: true },
      {
        header: 'FROM',
        value: (p) => (p.source === 'list' ? `list (${p.provider})` : 'enterprise'),
      },
      { header: 'INPUT', value: (p) => perMillion(p.input) },
      { header: 'OUTPUT', value: (p) => perMillion(p.output) },
      { header: 'CACHE READ', value: (p) => perMillion(p.cacheRead) },
      { header: 'CACHE WRITE', value: (p) => perMillion(p.cacheWrite) },
    ])
    deps.out.write(
      "\nUS dollars per million tokens; - is the provider's ratio to the input price.\n",
    )
    for (const u of answer.unlisted)
      deps.out.write(
        u.pricedAs === 'unpriced'
          ? `a ${u.provider} model with no price: unpriced, at $0.00 (the operator set its address); set one with osctl llm prices set\n`
          : `a ${u.provider} model with no price: priced as ${u.frontierModel}, its frontier model\n`,
      )
  })
}

export async function setPrice(
  deps: Deps,
  opts: { model: string; input: string; output: string; cacheRead?: string; cacheWrite?: string },
): Promise<void> {
  const body = {
    input: dollars(opts.input, '--input'),
    output: dollars(opts.output, '--output'),
    ...(opts.cacheRead !== undefined ? { cacheRead: dollars(opts.cacheRead, '--cache-read') } : {}),
    ...(opts.cacheWrite !== undefined
      ? { cacheWrite: dollars(opts.cacheWrite, '--cache-write') }
      : {}),
  }
  const price = await deps
    .client()
    .put<LlmPrice>(`/llm/prices/${encodeURIComponent(opts.model)}`, body)
  show(deps.out, price, () =>
    deps.out.write(
      `${price.model}: ${usdFromDollars(price.input)} input, ${usdFromDollars(price.output)} output per million tokens, from its next call\n`,
    ),
  )
}

export async function removePrice(
  deps: Deps,
  opts: { model: string; yes?: boolean },
): Promise<void> {
  await confirmDestructive(deps, opts.yes, `Remove the price of ${opts.model}`)
  await deps.client().delete(`/llm/prices/${encodeURIComponent(opts.model)}`)
  show(deps.out, { removed: { model: opts.model } }, () =>
    deps.out.write(`price of ${opts.model} removed: it is priced as osctl llm prices list says\n`),
  )
}

/** US dollars per million tokens from a flag: a number of at least 0. */
function dollars(value: string, flag: string): number {
  const n = Number(value.trim().replace(/^\$/, ''))
  if (value.trim() === '' || !Number.isFinite(n) || n < 0)
    throw new UsageError(`${flag} takes US dollars per million tokens, 0 or more; got "${value}"`)
  return n
}

export async function startOAuth(
  deps: Deps,
  opts: { team?: string; member?: string },
): Promise<void> {
  const client = deps.client()
  const layer = await teamOrMember(client, opts)
  const started = await client.post<Started>('/llm/provider_b/oauth/start', layer)
  show(deps.out, started, () => {
    printFields(deps.out, [
      ['url', started.url],
      ['state', started.state],
    ])
    deps.out.error(
      'sign in at the url, then: osctl llm oauth complete --code CODE --state STATE (within 15 minutes)\n',
    )
  })
}

export async function completeOAuth(
  deps: Deps,
  opts: { code: string; state: string },
): Promise<void> {
  const body = { code: opts.code, state: opts.state }
  showConnection(
    deps,
    await deps.client().post<LlmConnection>('/llm/provider_b/oauth/complete', body),
  )
}

export function registerLlm(program: Command, makeDeps: MakeDeps): void {
  const llm = program.command('llm').description(about.llm)
  const providerOption = (description: string) =>
    new Option('--provider <provider>', description).choices(providers)

  const connections = llm
    .command('connections')
    .description('model connections: API keys and subscription sign-ins, never the secret')
  examples(
    connections
      .command('list')
      .description('every model connection, with the last characters of its key')
      .action(actionOf(makeDeps, listConnections)),
    'osctl llm connections list',
  )
  examples(
    withBodyOptions(
      connections
        .command('update')
        .argument('<connection>', 'connection id')
        .description('rename, describe, or set the plan of a subscription sign-in')
        .option('--name <name>')
        .option('--description <text>')
        .option('--plan <plan>', 'subscription sign-ins only'),
    ).action(actionOf(makeDeps, updateConnection)),
    'osctl llm connections update 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --name "Research key"',
  )
  examples(
    connections
      .command('usage')
      .argument('<connection>', 'connection id')
      .description('calls, tokens and cost by day and model')
      .action(actionOf(makeDeps, connectionUsage)),
    'osctl llm connections usage 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )

  const bindings = llm
    .command('bindings')
    .description('API keys on the enterprise, a team or a member; a run uses the nearest')
  examples(
    bindings
      .command('list')
      .description('which keys are connected, where')
      .addOption(providerOption('one provider only'))
      .addOption(new Option('--layer <layer>', 'one layer only').choices(llmLayers))
      .option('--layer-id <ref>', 'with --layer team or member: the team or member')
      .option('--team <team>', 'keys on this team (id or slug)')
      .option('--member <member>', 'keys on this member (id, email or name)')
      .action(actionOf(makeDeps, listBindings)),
    'osctl llm bindings list',
    'osctl llm bindings list --member ada@acme.osd.local',
  )
  examples(
    bindings
      .command('set')
      .description('connect an API key, replacing the one of that provider and layer')
      .option('--key-stdin', 'read the key from stdin (keeps it out of shell history)')
      .option('--key <key>', 'the key itself (prefer --key-stdin)')
      .addOption(providerOption('provider_a (default) or provider_b'))
      .option('--team <team>', 'on this team (id or slug) instead of the enterprise')
      .option('--member <member>', 'on this member (id, email or name) instead of the enterprise')
      .action(actionOf(makeDeps, setBinding)),
    'printf %s "$PROVIDER_A_KEY" | osctl llm bindings set --key-stdin',
    'osctl llm bindings set --key-stdin --provider provider_b --team research < key.txt',
  )
  examples(
    bindings
      .command('remove')
      .description('remove the key of a provider from a layer')
      .addOption(providerOption('provider_a (default) or provider_b'))
      .option('--team <team>', 'from this team (id or slug) instead of the enterprise')
      .option('--member <member>', 'from this member (id, email or name) instead of the enterprise')
      .option('-y, --yes', 'do not ask')
      .action(actionOf(makeDeps, removeBinding)),
    'osctl llm bindings remove --provider provider_b --team research --yes',
  )

  const tiers = llm
    .command('tiers')
    .description('the model of each tier (economical, mid, frontier) per provider')
  examples(
    tiers
      .command('list', { isDefault: true })
      .description('the model per tier per provider, and which are overridden')
      .action(actionOf(makeDeps, listTiers)),
    'osctl llm tiers',
  )
  examples(
    tiers
      .command('override')
      .description("choose the enterprise's model for a tier of a provider")
      .addOption(new Option('--provider <provider>').choices(providers).makeOptionMandatory())
      .addOption(new Option('--tier <tier>').choices(modelTiers).makeOptionMandatory())
      .requiredOption('--model <model>', 'a model id (see osctl llm models)')
      .action(actionOf(makeDeps, overrideTier)),
    'osctl llm tiers override --provider provider_a --tier mid --model claude-sonnet-4-6',
  )

  examples(
    llm
      .command('models')
      .description("the models the connections offer (the provider's list, else the shipped one)")
      .action(actionOf(makeDeps, listModels)),
    'osctl llm models',
  )

  const prices = llm
    .command('prices')
    .description("what model calls are priced at: osd's list, and the enterprise's own prices")
  examples(
    prices
      .command('list', { isDefault: true })
      .description('every price, and how a model with none is priced')
      .action(actionOf(makeDeps, listPrices)),
    'osctl llm prices',
  )
  examples(
    prices
      .command('set')
      .description(
        "price a model osd's list does not hold (a local model, say), per million tokens",
      )
      .requiredOption('--model <model>', 'the model as the provider names it')
      .requiredOption('--input <usd>', 'US dollars per million input tokens')
      .requiredOption('--output <usd>', 'US dollars per million output tokens')
      .option('--cache-read <usd>', "cache-read input (default: the provider's ratio to --input)")
      .option('--cache-write <usd>', "cache-write input (default: the provider's ratio to --input)")
      .action(actionOf(makeDeps, setPrice)),
    'osctl llm prices set --model llama3.2 --input 0 --output 0',
    'osctl llm prices set --model gpt-5.7 --input 2 --output 12',
  )
  examples(
    prices
      .command('remove')
      .description("remove the enterprise's price of a model")
      .requiredOption('--model <model>', 'the model')
      .option('-y, --yes', 'do not ask')
      .action(actionOf(makeDeps, removePrice)),
    'osctl llm prices remove --model llama3.2 --yes',
  )

  const oauth = llm
    .command('oauth')
    .description('connect a provider_b subscription by signing in, instead of an API key')
  examples(
    oauth
      .command('start')
      .description('the address to sign in at, and the state to complete with')
      .option('--team <team>', 'for this team (id or slug) instead of the enterprise')
      .option('--member <member>', 'for this member (id, email or name) instead of the enterprise')
      .action(actionOf(makeDeps, startOAuth)),
    'osctl llm oauth start --team research',
  )
  examples(
    oauth
      .command('complete')
      .description('finish the sign-in with the code and state it returned')
      .requiredOption('--code <code>', 'the code the sign-in returned')
      .requiredOption('--state <state>', 'the state of osctl llm oauth start')
      .action(actionOf(makeDeps, completeOAuth)),
    'osctl llm oauth complete --code 4/0AbC... --state Zm9vYmFy...',
  )
}

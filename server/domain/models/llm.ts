import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { ApiError } from '../../../shared/errors.js'
import {
  catalogue,
  defaultTiers,
  llmLayers,
  modelTiers,
  providerOfModel,
  providers,
  type LlmBinding,
  type LlmBindingQuery,
  type LlmConnection,
  type LlmLayer,
  type ModelTier,
  type Provider,
} from '../../../shared/schemas/models.js'
import { sealedColumns, type Sealer } from '../../crypto.js'
import { transaction, type Db } from '../../db/sql.js'
import type { ModelProvider } from './provider.js'
import { layerFilter, layerOwner } from '../tasks/index.js'
import { hashSecret, lastChars, matchesHash } from '../secrets.js'

// Model connections, bindings, tiers and models (spec: Endpoints Models; DESIGN 6).

interface ConnectionRow {
  id: string
  enterpriseId: string
  provider: Provider
  kind: 'api_key' | 'subscription'
  layer: LlmLayer
  layerId: string | null
  name: string
  description: string
  plan: string | null
  secretCiphertext: Buffer
  secretHint: string
  accessExpiresAt: Date | null
  createdAt: Date
  updatedAt: Date
}

function toConnection(row: ConnectionRow): LlmConnection {
  return {
    id: row.id,
    provider: row.provider,
    kind: row.kind,
    layer: row.layer,
    layerId: row.layerId,
    name: row.name,
    description: row.description,
    plan: row.plan,
    keyHint: row.secretHint,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  }
}

function toBinding(row: ConnectionRow): LlmBinding {
  return {
    id: row.id,
    provider: row.provider,
    layer: row.layer,
    layerId: row.layerId,
    connected: true,
    keyHint: row.secretHint,
    createdAt: row.createdAt.toISOString(),
  }
}

/**
 * What is shown of a key: its last characters, when they are few enough of it to tell keys apart
 * without telling the key (any key is taken now, issue 51: a short one shows none).
 */
const hint = (secret: string) => (secret.length >= 12 ? `…${lastChars(secret)}` : '…')

/**
 * The layer id a key is kept under, once layerOwner has checked the layer: none for the enterprise
 * (its own id is accepted and stored as none), else the team's or the member's.
 */
async function keyLayerId(
  db: Db,
  enterpriseId: string,
  layer: LlmLayer,
  layerId: string | undefined,
): Promise<string | null> {
  const owner = await layerOwner(db, enterpriseId, llmLayers, layer, layerId)
  return layer === 'enterprise' ? null : owner
}

/** NOTIFY channel of bound keys: engines hear it and retry the enterprise's blocked runs at once. */
export const keyBoundChannel = 'osd_llm_key_bound'

/**
 * Binds an API key at a layer (replacing one there), encrypted at rest; a run uses the nearest layer's
 * key. Blocked runs of the enterprise are retried at once (DESIGN 6).
 */
export async function bindKey(
  db: Db,
  sealer: Sealer,
  enterpriseId: string,
  input: { apiKey: string; provider: Provider; layer: LlmLayer; layerId?: string },
): Promise<LlmBinding> {
  const layerId = await keyLayerId(db, enterpriseId, input.layer, input.layerId)
  return transaction(db, async (tx) => {
    const id = randomUUID()
    const [row] = await tx<ConnectionRow[]>`
      insert into llm_connections (id, enterprise_id, provider, kind, layer, layer_id, name, secret_ciphertext, secret_hint)
      values (${id}, ${enterpriseId}, ${input.provider}, 'api_key', ${input.layer}, ${layerId},
              ${`${input.provider} key (${input.layer})`}, ${sealer.seal(input.apiKey, sealedAt, id)},
              ${hint(input.apiKey)})
      on conflict (enterprise_id, provider, layer, coalesce(layer_id, '00000000-0000-0000-0000-000000000000'::uuid))
      do update set kind = 'api_key', secret_ciphertext = excluded.secret_ciphertext,
                    secret_hint = excluded.secret_hint, access_expires_at = null, updated_at = now()
      returning *`
    await tx`select pg_notify(${keyBoundChannel}, ${enterpriseId})`
    return toBinding(await sealedFor(tx, sealer, row!, id, input.apiKey))
  })
}

export async function listBindings(
  db: Db,
  enterpriseId: string,
  query: LlmBindingQuery,
): Promise<LlmBinding[]> {
  const byLayer = await layerFilter(db, enterpriseId, llmLayers, query)
  const rows = await db<ConnectionRow[]>`
    select * from llm_connections
     where enterprise_id = ${enterpriseId} and kind = 'api_key'
       ${query.provider ? db`and provider = ${query.provider}` : db``}
       ${byLayer.where}
     order by layer, provider, created_at`
  return rows.map(toBinding)
}

/** Removes the key of a provider at a layer (again: no change); a subscription sign-in stays. */
export async function unbindKey(
  db: Db,
  enterpriseId: string,
  query: LlmBindingQuery,
): Promise<void> {
  const provider = query.provider ?? 'provider_a'
  const layer = query.layer ?? 'enterprise'
  const layerId = await keyLayerId(db, enterpriseId, layer, query.layerId)
  await db`
    delete from llm_connections
     where enterprise_id = ${enterpriseId} and kind = 'api_key' and provider = ${provider}
       and layer = ${layer} and layer_id is not distinct from ${layerId}::uuid`
}

export async function listConnections(db: Db, enterpriseId: string): Promise<LlmConnection[]> {
  const rows = await db<ConnectionRow[]>`
    select * from llm_connections where enterprise_id = ${enterpriseId} order by created_at, id`
  return rows.map(toConnection)
}

async function loadConnection(db: Db, enterpriseId: string, id: string): Promise<ConnectionRow> {
  const [row] = await db<
    ConnectionRow[]
  >`select * from llm_connections where enterprise_id = ${enterpriseId} and id = ${id}`
  if (!row)
    throw new ApiError('connection_not_found', `No model connection ${id} in this enterprise.`)
  return row
}

/** Renames, describes, or sets the plan of a subscription-login connection. */
export async function updateConnection(
  db: Db,
  enterpriseId: string,
  id: string,
  patch: { name?: string; description?: string; plan?: string },
): Promise<LlmConnection> {
  const row = await loadConnection(db, enterpriseId, id)
  if (patch.plan !== undefined && row.kind !== 'subscription') {
    throw new ApiError('invalid_request', 'plan: only a subscription-login connection has a plan.')
  }
  const [updated] = await db<ConnectionRow[]>`
    update llm_connections
       set name = coalesce(${patch.name ?? null}::text, name),
           description = coalesce(${patch.description ?? null}::text, description),
           plan = coalesce(${patch.plan ?? null}::text, plan),
           updated_at = now()
     where id = ${id} returning *`
  return toConnection(updated!)
}

export async function connectionUsage(db: Db, enterpriseId: string, id: string) {
  await loadConnection(db, enterpriseId, id)
  const rows = await db<
    {
      day: string
      model: string
      calls: number
      inputTokens: number
      cacheReadTokens: number
      cacheWriteTokens: number
      outputTokens: number
      costUsdMicros: number
      unpricedCalls: number
    }[]
  >`
    select to_char(day, 'YYYY-MM-DD') as day, model, calls, input_tokens, cache_read_tokens,
           cache_write_tokens, output_tokens, cost_usd_micros, unpriced_calls
      from llm_usage where connection_id = ${id} order by day desc, model`
  return {
    connectionId: id,
    days: rows.map((r) => ({
      day: r.day,
      model: r.model,
      calls: r.calls,
      inputTokens: r.inputTokens,
      cacheReadTokens: r.cacheReadTokens,
      cacheWriteTokens: r.cacheWriteTokens,
      outputTokens: r.outputTokens,
      costUsdCents: r.costUsdMicros / 10_000,
      unpriced: r.unpricedCalls > 0,
    })),
  }
}

// --- tiers and models ---------------------------------------------------------------------------------

export async function getTiers(db: Db, enterpriseId: string) {
  const overrides = await db<{ provider: Provider; tier: ModelTier; model: string }[]>`
    select provider, tier, model from llm_tier_overrides where enterprise_id = ${enterpriseId}`
  const tiers = {} as Record<Provider, Record<ModelTier, { model: string; overridden: boolean }>>
  for (const provider of providers) {
    tiers[provider] = {} as Record<ModelTier, { model: string; overridden: boolean }>
    for (const tier of modelTiers) {
      const override = overrides.find((o) => o.provider === provider && o.tier === tier)
      tiers[provider][tier] = {
        model: override?.model ?? defaultTiers[provider][tier],
        overridden: Boolean(override),
      }
    }
  }
  return { tiers }
}

export async function overrideTier(
  db: Db,
  enterpriseId: string,
  input: { provider: Provider; tier: ModelTier; model: string },
): Promise<void> {
  await db`
    insert into llm_tier_overrides (enterprise_id, provider, tier, model)
    values (${enterpriseId}, ${input.provider}, ${input.tier}, ${input.model})
    on conflict (enterprise_id, provider, tier) do update set model = excluded.model, updated_at = now()`
}

/** Takes an enterprise's model for a tier of a provider back to the shipped one (again: no change). */
export async function clearTierOverride(
  db: Db,
  enterpriseId: string,
  input: { provider: Provider; tier: ModelTier },
): Promise<void> {
  await db`
    delete from llm_tier_overrides
     where enterprise_id = ${enterpriseId} and provider = ${input.provider} and tier = ${input.tier}`
}

/**
 * Whether the key of an API key connection is `candidate`, compared in constant time: what an apply of
 * documents asks to tell an unchanged key from a new one. The key itself never leaves this module.
 */
export async function sameKey(
  db: Db,
  sealer: Sealer,
  enterpriseId: string,
  id: string,
  candidate: string,
): Promise<boolean> {
  const row = await loadConnection(db, enterpriseId, id)
  if (row.kind !== 'api_key') return false
  return matchesHash(candidate, hashSecret(sealer.open(row.secretCiphertext, sealedAt, row.id)))
}

/** What a model connection needs at call time: its provider, its credential and the connection id. */
export interface ResolvedKey {
  connectionId: string
  provider: Provider
  key: string
}

/**
 * The key a run uses for a provider: the member's, else the team's, else the enterprise's (DESIGN 6,
 * nearest layer wins). `provider` undefined takes the nearest layer with any key, provider_a first.
 */
export async function resolveKey(
  db: Db,
  sealer: Sealer,
  enterpriseId: string,
  scope: { memberId?: string | null; teamId?: string | null },
  provider?: Provider,
  oauth?: OAuthSettings,
): Promise<ResolvedKey | undefined> {
  const rows = await db<ConnectionRow[]>`
    select * from llm_connections
     where enterprise_id = ${enterpriseId}
       ${provider ? db`and provider = ${provider}` : db``}
       and (layer = 'enterprise'
            or (layer = 'team' and layer_id = ${scope.teamId ?? null}::uuid)
            or (layer = 'member' and layer_id = ${scope.memberId ?? null}::uuid))
     order by case layer when 'member' then 0 when 'team' then 1 else 2 end, provider`
  const row = rows[0]
  if (!row) return undefined
  return {
    connectionId: row.id,
    provider: row.provider,
    key: await credentialOf(db, sealer, row, oauth),
  }
}

/** The secret of a connection: its key, or a subscription's access token (refreshed when expired). */
async function credentialOf(
  db: Db,
  sealer: Sealer,
  row: ConnectionRow,
  oauth?: OAuthSettings,
): Promise<string> {
  if (row.kind === 'api_key') return sealer.open(row.secretCiphertext, sealedAt, row.id)
  const tokens = subscriptionTokens(sealer, row)
  if (!expiring(row, tokens)) return tokens.accessToken
  // One refresh per connection at a time in this process; the row lock orders the other processes.
  let flights = refreshing.get(db)
  if (!flights) refreshing.set(db, (flights = new Map()))
  let flight = flights.get(row.id)
  if (!flight) {
    flight = refreshAccessToken(db, sealer, row.id, oauth).finally(() => flights.delete(row.id))
    flights.set(row.id, flight)
  }
  return flight
}

const refreshing = new WeakMap<Db, Map<string, Promise<string>>>()

type SubscriptionTokens = { accessToken: string; refreshToken?: string }

function subscriptionTokens(sealer: Sealer, row: ConnectionRow): SubscriptionTokens {
  return JSON.parse(sealer.open(row.secretCiphertext, sealedAt, row.id)) as SubscriptionTokens
}

/** Due for a refresh: expiring within the minute, and refreshable. */
function expiring(row: ConnectionRow, tokens: SubscriptionTokens): boolean {
  return Boolean(
    row.accessExpiresAt &&
    row.accessExpiresAt.getTime() <= Date.now() + 60_000 &&
    tokens.refreshToken,
  )
}

/**
 * Refreshes a subscription's access token holding its connection's row lock, so that of the processes
 * sharing the database only the first refreshes: the sign-in service may rotate the refresh token, and a
 * second exchange of the old one would be refused. Whoever waited on the lock finds the token fresh.
 */
function refreshAccessToken(
  db: Db,
  sealer: Sealer,
  id: string,
  oauth: OAuthSettings | undefined,
): Promise<string> {
  return transaction(db, async (tx) => {
    const [row] = await tx<
      ConnectionRow[]
    >`select * from llm_connections where id = ${id} for update`
    if (!row) throw new ApiError('invalid_request', 'the model connection was removed')
    const tokens = subscriptionTokens(sealer, row)
    if (!expiring(row, tokens)) return tokens.accessToken
    const fresh = await exchangeToken(configured(oauth), {
      grant_type: 'refresh_token',
      refresh_token: tokens.refreshToken!,
    })
    const sealed = sealer.seal(
      JSON.stringify({
        accessToken: fresh.accessToken,
        refreshToken: fresh.refreshToken ?? tokens.refreshToken,
      }),
      sealedAt,
      id,
    )
    await tx`
      update llm_connections
         set secret_ciphertext = ${sealed}, access_expires_at = ${fresh.expiresAt}, updated_at = now()
       where id = ${id}`
    return fresh.accessToken
  })
}

// A provider's own model list, read at most every 10 minutes per connection and read again when the
// connection's credential changes (a new key, a refreshed token). Kept for the connections read last
// (listsKept), in the order they were read: a connection removed (a key unbound, its enterprise gone)
// is never read again, and kept for good its list made a daemon that runs for months grow with every
// key ever bound. One read again after it left costs a call to its provider.
const listed = new Map<string, { at: number; version: number; models: string[] | undefined }>()
const listsKept = 1_000

/** How many connections' lists this process keeps (for tests). */
export function modelListsKept(): number {
  return listed.size
}

/**
 * The models each connected provider offers: the provider's own list when it answers, else the shipped
 * catalogue (spec: GET /v1/llm/models). With no connection at all, the catalogue of every provider.
 */
export async function offeredModels(
  db: Db,
  sealer: Sealer,
  enterpriseId: string,
  clients: Record<Provider, ModelProvider>,
  oauth?: OAuthSettings,
): Promise<{ provider: Provider; id: string; source: 'provider' | 'catalogue' }[]> {
  const rows = await db<ConnectionRow[]>`
    select distinct on (provider) * from llm_connections where enterprise_id = ${enterpriseId}
     order by provider, case layer when 'enterprise' then 0 when 'team' then 1 else 2 end`
  const connected = rows.length
    ? rows
    : providers.map((provider) => ({ provider }) as ConnectionRow)
  const lists = await Promise.all(
    connected.map(async (row) => {
      const fromProvider = row.secretCiphertext
        ? await listOf(db, sealer, row, clients[row.provider], oauth)
        : undefined
      return fromProvider
        ? fromProvider.map((id) => ({ provider: row.provider, id, source: 'provider' as const }))
        : Object.keys(catalogue[row.provider]).map((id) => ({
            provider: row.provider,
            id,
            source: 'catalogue' as const,
          }))
    }),
  )
  return lists.flat()
}

async function listOf(
  db: Db,
  sealer: Sealer,
  row: ConnectionRow,
  client: ModelProvider,
  oauth: OAuthSettings | undefined,
): Promise<string[] | undefined> {
  const version = row.updatedAt.getTime()
  const cached = listed.get(row.id)
  // A list is kept 10 minutes; a failure only 30 s, so a provider back up is asked again soon.
  const keepMs = cached?.models ? 10 * 60_000 : 30_000
  if (cached && cached.version === version && Date.now() - cached.at < keepMs) return cached.models
  let models: string[] | undefined
  try {
    models = await client.listModels(
      { key: await credentialOf(db, sealer, row, oauth) },
      AbortSignal.timeout(3000),
    )
  } catch {
    models = undefined
  }
  listed.delete(row.id)
  if (listed.size >= listsKept) listed.delete(listed.keys().next().value!)
  listed.set(row.id, { at: Date.now(), version, models })
  return models
}

/** 400 llm_model_not_in_catalogue unless a connected provider offers the model (spec: Codes). */
export async function requireOfferedModel(
  db: Db,
  sealer: Sealer,
  enterpriseId: string,
  clients: Record<Provider, ModelProvider>,
  model: string,
  oauth?: OAuthSettings,
): Promise<void> {
  const offered = await offeredModels(db, sealer, enterpriseId, clients, oauth)
  if (!offered.some((m) => m.id === model)) {
    throw new ApiError(
      'llm_model_not_in_catalogue',
      `spend.model ${model} is not offered by the connected provider(s): ${[...new Set(offered.map((m) => m.id))].join(', ')}.`,
    )
  }
}

/**
 * Which provider and model a run uses (DESIGN 6): an exact spend.model names its provider; else the
 * tier (spend.maxModelTier, default mid) picks the model of the provider whose key is nearest.
 */
export async function chooseModel(
  db: Db,
  sealer: Sealer,
  enterpriseId: string,
  scope: { memberId?: string | null; teamId?: string | null },
  spend: { model?: string; maxModelTier?: ModelTier } | null,
  oauth?: OAuthSettings,
): Promise<{ key: ResolvedKey; model: string; tier: ModelTier | 'exact' } | { blocked: string }> {
  const wanted = spend?.model ? providerOfModel(spend.model) : undefined
  let key: ResolvedKey | undefined
  try {
    key = await resolveKey(db, sealer, enterpriseId, scope, wanted, oauth)
    if (!key && spend?.model && !wanted)
      key = await resolveKey(db, sealer, enterpriseId, scope, undefined, oauth) // a listed, uncatalogued model
  } catch (err) {
    // A subscription whose token cannot be refreshed (the sign-in service refused or is away) holds
    // the run like a missing key, rather than failing its executor until another engine takes it over.
    if (!(err instanceof ApiError)) throw err
    return {
      blocked: `The provider_b subscription's access token could not be refreshed (${err.message}): sign in again with POST /v1/llm/provider_b/oauth/start.`,
    }
  }
  if (!key) {
    return {
      blocked: `No model key is connected${wanted ? ` for ${wanted}` : ''} on the member, its team or the enterprise: bind one with POST /v1/llm/bindings.`,
    }
  }
  if (spend?.model) return { key, model: spend.model, tier: 'exact' }
  const { tiers } = await getTiers(db, enterpriseId)
  const tier = spend?.maxModelTier ?? 'mid'
  return { key, model: tiers[key.provider][tier].model, tier }
}

// --- provider_b subscription sign-in (OAuth authorization code with PKCE) ------------------------------

/** The provider_b sign-in's endpoints and client (config.providerBOAuth, the redirect resolved). */
export interface OAuthSettings {
  authorizeUrl: string
  tokenUrl: string
  clientId: string | undefined
  redirectUri: string
  scope: string
}

function configured(oauth: OAuthSettings | undefined): OAuthSettings & { clientId: string } {
  if (!oauth?.clientId) {
    throw new ApiError(
      'invalid_request',
      'provider_b sign-in is not configured: set OSD_PROVIDER_B_OAUTH_CLIENT_ID (and the endpoints if not the defaults).',
    )
  }
  return oauth as OAuthSettings & { clientId: string }
}

/** Starts a sign-in: the address to send the person to, with PKCE and a state kept for /complete. */
export async function startOAuth(
  db: Db,
  sealer: Sealer,
  oauth: OAuthSettings,
  enterpriseId: string,
  input: { layer: LlmLayer; layerId?: string },
): Promise<{ url: string; state: string }> {
  const config = configured(oauth)
  const layerId = await keyLayerId(db, enterpriseId, input.layer, input.layerId)
  const state = randomBytes(24).toString('base64url')
  const verifier = randomBytes(48).toString('base64url')
  const challenge = createHash('sha256').update(verifier).digest('base64url')
  await db`
    insert into llm_oauth_states (state, enterprise_id, verifier_ciphertext, layer, layer_id)
    values (${state}, ${enterpriseId}, ${sealer.seal(verifier, sealedColumns.llmVerifier, state)},
            ${input.layer}, ${layerId})`
  const url = new URL(config.authorizeUrl)
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: config.clientId,
    redirect_uri: config.redirectUri,
    scope: config.scope,
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  }).toString()
  return { url: url.toString(), state }
}

/** Completes a sign-in: exchanges the code for tokens and keeps them as a subscription connection. */
export async function completeOAuth(
  db: Db,
  sealer: Sealer,
  oauth: OAuthSettings,
  enterpriseId: string,
  input: { code: string; state: string },
): Promise<LlmConnection> {
  const config = configured(oauth)
  const [pending] = await db<
    { verifierCiphertext: Buffer; layer: LlmLayer; layerId: string | null; createdAt: Date }[]
  >`
    delete from llm_oauth_states where state = ${input.state} and enterprise_id = ${enterpriseId}
    returning verifier_ciphertext, layer, layer_id, created_at`
  if (!pending || Date.now() - pending.createdAt.getTime() > 15 * 60_000) {
    throw new ApiError('invalid_request', 'state: unknown or expired; start the sign-in again.')
  }
  const tokens = await exchangeToken(config, {
    grant_type: 'authorization_code',
    code: input.code,
    redirect_uri: config.redirectUri,
    code_verifier: sealer.open(pending.verifierCiphertext, sealedColumns.llmVerifier, input.state),
  })
  const secret = JSON.stringify(tokens)
  return transaction(db, async (tx) => {
    const id = randomUUID()
    const [row] = await tx<ConnectionRow[]>`
      insert into llm_connections (id, enterprise_id, provider, kind, layer, layer_id, name, plan, secret_ciphertext,
                                   secret_hint, access_expires_at)
      values (${id}, ${enterpriseId}, 'provider_b', 'subscription', ${pending.layer}, ${pending.layerId},
              'provider_b subscription', null, ${sealer.seal(secret, sealedAt, id)}, ${hint(tokens.accessToken)},
              ${tokens.expiresAt})
      on conflict (enterprise_id, provider, layer, coalesce(layer_id, '00000000-0000-0000-0000-000000000000'::uuid))
      do update set kind = 'subscription', secret_ciphertext = excluded.secret_ciphertext,
                    secret_hint = excluded.secret_hint, access_expires_at = excluded.access_expires_at, updated_at = now()
      returning *`
    await tx`select pg_notify(${keyBoundChannel}, ${enterpriseId})`
    return toConnection(await sealedFor(tx, sealer, row!, id, secret))
  })
}

/** Where a connection's secret is sealed: bound to its row (crypto.ts). */
const sealedAt = sealedColumns.llmSecret

/**
 * The connection an upsert answered, its secret sealed for its row: an upsert that met the layer's
 * connection kept that row's id, not the one the secret was sealed for, so it is sealed again for it.
 */
async function sealedFor(
  tx: Db,
  sealer: Sealer,
  row: ConnectionRow,
  sealedFor: string,
  secret: string,
): Promise<ConnectionRow> {
  if (row.id === sealedFor) return row
  const [resealed] = await tx<ConnectionRow[]>`
    update llm_connections set secret_ciphertext = ${sealer.seal(secret, sealedAt, row.id)}
     where id = ${row.id}
     returning *`
  return resealed!
}

async function exchangeToken(
  config: OAuthSettings & { clientId: string },
  params: Record<string, string>,
) {
  const res = await fetch(config.tokenUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams({ ...params, client_id: config.clientId }),
    signal: AbortSignal.timeout(15_000),
  }).catch((err: Error) => {
    throw new ApiError('invalid_request', `the sign-in service did not answer: ${err.message}`)
  })
  const body = (await res.json().catch(() => ({}))) as {
    access_token?: string
    refresh_token?: string
    expires_in?: number
    error?: string
  }
  if (!res.ok || !body.access_token) {
    throw new ApiError(
      'invalid_request',
      `the sign-in service refused the code: ${body.error ?? res.status}`,
    )
  }
  return {
    accessToken: body.access_token,
    refreshToken: body.refresh_token,
    expiresAt: body.expires_in ? new Date(Date.now() + body.expires_in * 1000) : null,
  }
}

import { z } from 'zod'
import { IsoTime, Uuid } from './common.js'
import { modelTiers, providers, llmLayers } from '../values.js'

/**
 * Tokens of model calls, each kind once as the provider bills it (DESIGN 13): the usage list's days and
 * a run's cost both answer them.
 */
export const tokenCounts = {
  inputTokens: z.number().int().meta({
    description:
      "input tokens billed at the model's input price: neither read from nor written to the provider's prompt cache",
  }),
  cacheReadTokens: z
    .number()
    .int()
    .meta({ description: "input tokens read from the provider's prompt cache" }),
  cacheWriteTokens: z
    .number()
    .int()
    .meta({ description: "input tokens written to the provider's prompt cache" }),
  outputTokens: z.number().int(),
}
export { modelTiers, providers, llmLayers }

// Models (spec: Endpoints Models; Task definition spend; DESIGN 6).

export const ModelTier = z.enum(modelTiers).meta({ id: 'ModelTier' })
export type ModelTier = z.infer<typeof ModelTier>

export const Provider = z.enum(providers).meta({ id: 'Provider' })
export type Provider = z.infer<typeof Provider>

export const LlmLayer = z.enum(llmLayers)
export type LlmLayer = z.infer<typeof LlmLayer>

/** The shipped model per tier and provider; an enterprise may override (POST /v1/llm/tiers/override). */
export const defaultTiers: Record<Provider, Record<ModelTier, string>> = {
  provider_a: {
    economical: 'claude-haiku-5-5',
    mid: 'claude-sonnet-5-5',
    frontier: 'claude-opus-5-5',
  },
  provider_b: { economical: 'gpt-5.4-mini', mid: 'gpt-5.4', frontier: 'gpt-5.6-sol' },
}

/**
 * A model's price in US dollars per million tokens (numerically, micro-dollars per token) for each kind
 * of token a call is billed for: input neither read from nor written to the provider's prompt cache,
 * input read from it, input written to it, and output.
 */
export interface ModelPrice {
  input: number
  output: number
  cacheRead: number
  cacheWrite: number
}

/**
 * The shipped catalogue: models each provider offers when its own list cannot be read, with prices in
 * US dollars per million tokens (input, output; cache read and write where a model has its own figure).
 * A model that is not here is priced as the enterprise sets it (PUT /v1/llm/prices/{model}); without
 * that, at 0 ("unpriced") when its provider's address was set by the operator (a local server), else
 * as its provider's frontier model, so a real provider's spend is never under-counted (issue 51).
 */
export const catalogue: Record<
  Provider,
  Record<string, { input: number; output: number; cacheRead?: number; cacheWrite?: number }>
> = {
  provider_a: {
    'claude-haiku-5-5': { input: 1, output: 5 },
    'claude-sonnet-5-5': { input: 3, output: 15 },
    'claude-opus-5-5': { input: 5, output: 25 },
    'claude-haiku-4-5': { input: 1, output: 5 },
    'claude-sonnet-4-6': { input: 3, output: 15 },
    'claude-opus-4-6': { input: 5, output: 25 },
  },
  provider_b: {
    'gpt-5.4-nano': { input: 0.1, output: 0.4 },
    'gpt-5.4-mini': { input: 0.4, output: 1.6 },
    'gpt-5.4': { input: 1.25, output: 10 },
    'gpt-5.6-sol': { input: 15, output: 120 },
    'gpt-5': { input: 1.25, output: 10 },
    'gpt-5-mini': { input: 0.25, output: 2 },
  },
}

/**
 * What the cache's tokens cost against the input price where a model has no figure of its own, as each
 * provider publishes it: provider_a (Anthropic) reads at 0.1x and writes at 1.25x (the 5-minute cache,
 * the one osd's breakpoints ask for); provider_b (OpenAI) caches by itself, bills the writes as plain
 * input, and reads at 0.1x for the GPT-5 family its catalogue holds.
 */
export const cacheRatios: Record<Provider, { read: number; write: number }> = {
  provider_a: { read: 0.1, write: 1.25 },
  provider_b: { read: 0.1, write: 1 },
}

/** A price with its cache figures filled in from the provider's ratios where it has none of its own. */
export function withCachePrices(
  provider: Provider,
  price: { input: number; output: number; cacheRead?: number | null; cacheWrite?: number | null },
): ModelPrice {
  const ratio = cacheRatios[provider]
  // To 12 digits: 3 * 0.1 is 0.30000000000000004 in floating point, and a price is a published figure.
  const times = (price: number, by: number) => Number((price * by).toPrecision(12))
  return {
    input: price.input,
    output: price.output,
    cacheRead: price.cacheRead ?? times(price.input, ratio.read),
    cacheWrite: price.cacheWrite ?? times(price.input, ratio.write),
  }
}

export function priceOf(provider: Provider, model: string): ModelPrice {
  const listed = catalogue[provider][model] ?? catalogue[provider][defaultTiers[provider].frontier]!
  return withCachePrices(provider, listed)
}

/** The provider whose catalogue holds a model, if any. */
export function providerOfModel(model: string): Provider | undefined {
  return providers.find((p) => model in catalogue[p])
}

export const LlmConnection = z
  .object({
    id: Uuid,
    provider: Provider,
    kind: z.enum(['api_key', 'subscription']),
    layer: LlmLayer,
    layerId: Uuid.nullable(),
    name: z.string(),
    description: z.string(),
    plan: z.string().nullable(),
    /** The last characters of the key: enough to tell keys apart, never the key. */
    keyHint: z.string(),
    createdAt: IsoTime,
    updatedAt: IsoTime,
  })
  .meta({ id: 'LlmConnection' })
export type LlmConnection = z.infer<typeof LlmConnection>

export const LlmConnectionPatch = z
  .object({
    name: z.string().trim().min(1).max(200).optional(),
    description: z.string().max(2000).optional(),
    plan: z
      .string()
      .trim()
      .min(1)
      .max(100)
      .optional()
      .meta({ description: 'subscription-login connections only' }),
  })
  .meta({ id: 'LlmConnectionPatch' })

export const LlmUsage = z
  .object({
    connectionId: Uuid,
    days: z.array(
      z.object({
        day: z.string(),
        model: z.string(),
        calls: z.number().int(),
        ...tokenCounts,
        costUsdCents: z.number(),
        unpriced: z.boolean().meta({
          description:
            'some of these calls had no price (a model neither listed nor priced, on an address the operator set): they count $0',
        }),
      }),
    ),
  })
  .meta({ id: 'LlmUsage' })

export const LlmBinding = z
  .object({
    id: Uuid,
    provider: Provider,
    layer: LlmLayer,
    layerId: Uuid.nullable(),
    connected: z.literal(true),
    keyHint: z.string(),
    createdAt: IsoTime,
  })
  .meta({ id: 'LlmBinding' })
export type LlmBinding = z.infer<typeof LlmBinding>

export const LlmBindingCreate = z
  .object({
    // Any text: a local server takes any key, and a real provider refuses a wrong one itself (the
    // work then waits, blocked, saying so). Blank is no key.
    apiKey: z.string().min(1).max(500).regex(/\S/, 'the key is blank'),
    provider: Provider.default('provider_a'),
    layer: LlmLayer.default('enterprise'),
    layerId: Uuid.optional(),
  })
  .meta({ id: 'LlmBindingCreate' })

/** GET and DELETE /v1/llm/bindings: which keys, by provider and by layer (named by its id). */
export const LlmBindingQuery = z.object({
  provider: Provider.optional(),
  layer: LlmLayer.optional(),
  layerId: Uuid.optional(),
})
export type LlmBindingQuery = z.infer<typeof LlmBindingQuery>

export const OAuthStart = z
  .object({ layer: LlmLayer.default('enterprise'), layerId: Uuid.optional() })
  .meta({ id: 'OAuthStart' })
export const OAuthStarted = z
  .object({ url: z.string(), state: z.string() })
  .meta({ id: 'OAuthStarted' })
export const OAuthComplete = z
  .object({ code: z.string().min(1), state: z.string().min(1) })
  .meta({ id: 'OAuthComplete' })

export const Tiers = z
  .object({
    tiers: z.record(
      Provider,
      z.record(ModelTier, z.object({ model: z.string(), overridden: z.boolean() })),
    ),
  })
  .meta({ id: 'LlmTiers' })

export const TierOverride = z
  .object({ provider: Provider, tier: ModelTier, model: z.string().trim().min(1).max(200) })
  .meta({ id: 'LlmTierOverride' })

export const LlmModels = z
  .object({
    models: z.array(
      z.object({
        provider: Provider,
        id: z.string(),
        /** provider: the provider listed it; catalogue: the provider could not be asked, the shipped list stands in. */
        source: z.enum(['provider', 'catalogue']),
      }),
    ),
  })
  .meta({ id: 'LlmModels' })

/** A model's price per million tokens, in US dollars, and where it comes from. */
export const LlmPrice = z
  .object({
    model: z.string(),
    /** list: osd's own price list (the catalogue); enterprise: set with PUT /v1/llm/prices/{model}. */
    source: z.enum(['list', 'enterprise']),
    /** The provider whose list holds it; null for an enterprise's price (any provider's model). */
    provider: z.enum(providers).nullable(),
    input: z.number(),
    output: z.number(),
    cacheRead: z.number().nullable().meta({
      description: "null: the provider's ratio to the input price (0.1x)",
    }),
    cacheWrite: z.number().nullable().meta({
      description:
        "null: the provider's ratio to the input price (provider_a 1.25x, provider_b 1x)",
    }),
    updatedAt: IsoTime.nullable(),
  })
  .meta({ id: 'LlmPrice' })
export type LlmPrice = z.infer<typeof LlmPrice>

const usdPerMillion = (what: string) =>
  z
    .number()
    .min(0)
    .max(100_000)
    .meta({ description: `US dollars per million ${what} tokens` })

/** PUT /v1/llm/prices/{model}: the price of a model the list does not hold. */
export const LlmPriceInput = z
  .object({
    input: usdPerMillion('input'),
    output: usdPerMillion('output'),
    cacheRead: usdPerMillion('cache-read input').optional(),
    cacheWrite: usdPerMillion('cache-write input').optional(),
  })
  .meta({ id: 'LlmPriceInput' })
export type LlmPriceInput = z.infer<typeof LlmPriceInput>

/** GET /v1/llm/prices: every price, and how a model with none is priced on each provider. */
export const LlmPrices = z
  .object({
    prices: z.array(LlmPrice),
    unlisted: z.array(
      z.object({
        provider: Provider,
        /** Whether the operator set this provider's address (OSD_PROVIDER_A_BASE_URL, ...). */
        baseUrlSetByOperator: z.boolean(),
        /**
         * unpriced: at 0, and answers say unpriced (a local server); frontier: as the provider's
         * frontier model (`frontierModel`), so a real provider's spend is never under-counted.
         */
        pricedAs: z.enum(['unpriced', 'frontier']),
        frontierModel: z.string(),
      }),
    ),
  })
  .meta({ id: 'LlmPrices' })
export type LlmPrices = z.infer<typeof LlmPrices>

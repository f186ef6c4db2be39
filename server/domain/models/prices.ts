import { ApiError } from '../../../shared/errors.js'
import {
  catalogue,
  defaultTiers,
  priceOf,
  providerOfModel,
  providers,
  withCachePrices,
  type LlmPrice,
  type LlmPriceInput,
  type LlmPrices,
  type ModelPrice,
  type Provider,
} from '../../../shared/schemas/models.js'
import type { Db } from '../../db/sql.js'

// What a model call is priced at (DESIGN 6, 13; issue 51). A model of osd's price list (the shipped
// catalogue) at the list's price; any other at the price its enterprise set (llm_prices, this module
// its one writer); with none set, at 0 when its provider's address was set by the operator (a local
// server: "unpriced", and answers say so), else as its provider's frontier model, so that a real
// provider's spend is never under-counted and caps hold.

/** The most models an enterprise prices: GET /v1/llm/prices answers them all, unpaged. */
export const maxPrices = 500

/** A call's price, and whether it came from no price at all (then every figure is 0). */
export interface CallPrice {
  price: ModelPrice
  unpriced: boolean
}

const free: ModelPrice = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }

interface PriceRow {
  model: string
  inputUsdMtok: number
  outputUsdMtok: number
  cacheReadUsdMtok: number | null
  cacheWriteUsdMtok: number | null
  updatedAt: Date
}

/**
 * The price of a call of `model` on `provider` for the enterprise. A listed model costs no read; an
 * unlisted one reads the enterprise's price (one row by its key).
 */
export async function priceForCall(
  db: Db,
  enterpriseId: string,
  provider: Provider,
  model: string,
  baseUrlSetByOperator: boolean,
): Promise<CallPrice> {
  if (model in catalogue[provider]) return { price: priceOf(provider, model), unpriced: false }
  const [row] = await db<PriceRow[]>`
    select model, input_usd_mtok, output_usd_mtok, cache_read_usd_mtok, cache_write_usd_mtok, updated_at
      from llm_prices where enterprise_id = ${enterpriseId} and model = ${model}`
  if (row) return { price: withCachePrices(provider, rowPrice(row)), unpriced: false }
  if (baseUrlSetByOperator) return { price: free, unpriced: true }
  return { price: priceOf(provider, model), unpriced: false }
}

function rowPrice(row: PriceRow) {
  return {
    input: row.inputUsdMtok,
    output: row.outputUsdMtok,
    cacheRead: row.cacheReadUsdMtok,
    cacheWrite: row.cacheWriteUsdMtok,
  }
}

function toPrice(row: PriceRow): LlmPrice {
  return {
    model: row.model,
    source: 'enterprise',
    provider: null,
    ...rowPrice(row),
    updatedAt: row.updatedAt.toISOString(),
  }
}

/** GET /v1/llm/prices: the list's prices, the enterprise's, and how a model with none is priced. */
export async function listPrices(
  db: Db,
  enterpriseId: string,
  baseUrlSetByOperator: Record<Provider, boolean>,
): Promise<LlmPrices> {
  const rows = await db<PriceRow[]>`
    select model, input_usd_mtok, output_usd_mtok, cache_read_usd_mtok, cache_write_usd_mtok, updated_at
      from llm_prices where enterprise_id = ${enterpriseId} order by model`
  const listed = providers.flatMap((provider) =>
    Object.entries(catalogue[provider]).map(([model, price]): LlmPrice => ({
      model,
      source: 'list',
      provider,
      input: price.input,
      output: price.output,
      cacheRead: price.cacheRead ?? null,
      cacheWrite: price.cacheWrite ?? null,
      updatedAt: null,
    })),
  )
  return {
    prices: [...listed, ...rows.map(toPrice)],
    unlisted: providers.map((provider) => ({
      provider,
      baseUrlSetByOperator: baseUrlSetByOperator[provider],
      pricedAs: baseUrlSetByOperator[provider] ? 'unpriced' : 'frontier',
      frontierModel: defaultTiers[provider].frontier,
    })),
  }
}

/**
 * PUT /v1/llm/prices/{model}: the enterprise's price of a model the list does not hold. A listed
 * model keeps the list's price: an enterprise cannot make a provider's model cheaper than it is and so
 * slip past its own caps.
 */
export async function setPrice(
  db: Db,
  enterpriseId: string,
  model: string,
  input: LlmPriceInput,
): Promise<LlmPrice> {
  const name = model.trim()
  if (!name || name.length > 200)
    throw new ApiError('invalid_request', 'model: 1 to 200 characters, not blank.')
  const provider = providerOfModel(name)
  if (provider) {
    const listed = priceOf(provider, name)
    throw new ApiError(
      'invalid_request',
      `${name} is in osd's price list ($${listed.input} input, $${listed.output} output per million tokens); a price is set only for a model the list does not hold.`,
    )
  }
  // A new model only while the enterprise has fewer than maxPrices: the list is answered whole.
  const [row] = await db<PriceRow[]>`
    insert into llm_prices (enterprise_id, model, input_usd_mtok, output_usd_mtok, cache_read_usd_mtok,
                            cache_write_usd_mtok)
    select ${enterpriseId}, ${name}, ${input.input}, ${input.output}, ${input.cacheRead ?? null},
           ${input.cacheWrite ?? null}
     where exists (select 1 from llm_prices where enterprise_id = ${enterpriseId} and model = ${name})
        or (select count(*) from llm_prices where enterprise_id = ${enterpriseId}) < ${maxPrices}
    on conflict (enterprise_id, model) do update
       set input_usd_mtok = excluded.input_usd_mtok, output_usd_mtok = excluded.output_usd_mtok,
           cache_read_usd_mtok = excluded.cache_read_usd_mtok,
           cache_write_usd_mtok = excluded.cache_write_usd_mtok, updated_at = now()
    returning model, input_usd_mtok, output_usd_mtok, cache_read_usd_mtok, cache_write_usd_mtok, updated_at`
  if (!row)
    throw new ApiError(
      'invalid_request',
      `The enterprise prices at most ${maxPrices} models: remove one first (DELETE /v1/llm/prices/{model}).`,
    )
  return toPrice(row)
}

/** DELETE /v1/llm/prices/{model}: the model is unpriced again (or priced as the frontier). */
export async function removePrice(db: Db, enterpriseId: string, model: string): Promise<void> {
  await db`delete from llm_prices where enterprise_id = ${enterpriseId} and model = ${model.trim()}`
}

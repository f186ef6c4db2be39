//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export {
  listConnections,
  updateConnection,
  connectionUsage,
  offeredModels,
  requireOfferedModel,
  startOAuth,
  completeOAuth,
} from './llm.js'
export { listPrices, setPrice, removePrice } from './prices.js'

// For the API (routes and http/) and other concepts of the domain.
export { listBindings, unbindKey, getTiers, overrideTier } from './llm.js'
export { getSpend, setEnabled } from './spend.js'

// For the API (routes and http/), other concepts of the domain and tests and benches.
export { bindKey } from './llm.js'
export { setCap } from './spend.js'

// For the engine.
export { keyBoundChannel, type ResolvedKey, type OAuthSettings } from './llm.js'
export {
  checkRoom,
  holdReservation,
  takeReservation,
  releaseInterrupted,
  releaseAbandoned,
  settle,
  worstCaseMicros,
  callCostMicros,
  countUsage,
  type RunLayers,
  type SpendRefusal,
  type ReservedFor,
} from './spend.js'
export {
  type ToolSpec,
  type ToolCall,
  type Message,
  type TokenUsage,
  type ModelReply,
  type Credentials,
  type OnText,
  type ModelProvider,
} from './provider.js'
export { type CallPrice } from './prices.js'
export { holdFor, type HoldCause } from './holds.js'

// For the engine and tests and benches.
export { chooseModel } from './llm.js'
export { type ModelRequest, ProviderError } from './provider.js'
export { priceForCall } from './prices.js'

// For other concepts of the domain.
export { clearTierOverride, sameKey } from './llm.js'

// For the daemon and the operator commands.
export { spendCapUse } from './spend.js'

// For tests and benches.
export { resolveKey } from './llm.js'

//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export { listDeliveries, getDelivery, replayDelivery, secretHeader } from './webhooks.js'

// For the API (routes and http/) and tests and benches.
export { receiveWebhook } from './webhooks.js'

// For the engine and tests and benches.
export { pruneRefusedDeliveries } from './webhooks.js'

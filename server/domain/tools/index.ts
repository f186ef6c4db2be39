//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export { listSignIns, forgetSignIn, startToolOAuth } from './connections.js'

// For the API (routes and http/) and other concepts of the domain.
export {
  listToolConnections,
  updateToolConnection,
  deleteToolConnection,
  type BindRight,
} from './connections.js'

// For the API (routes and http/), other concepts of the domain and tests and benches.
export { createToolConnection } from './connections.js'

// For the engine.
export { nearestConnections, type RunConnection } from './connections.js'

// For the engine and tests and benches.
export { connectionsForRun } from './connections.js'

// For other concepts of the domain.
export { reservedToolNamespace, sameToolToken } from './connections.js'

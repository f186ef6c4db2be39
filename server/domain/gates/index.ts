//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export { listGates, getGate, decideChatGate } from './gates.js'

// For the API (routes and http/), other concepts of the domain and tests and benches.
export { decideGate } from './gates.js'

// For the engine.
export { gateOfStep } from './gates.js'

// For the engine and tests and benches.
export { openChatGate, openGate } from './gates.js'

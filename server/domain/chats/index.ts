export * from './chats.js'
export * from './deltas.js'
export * from './events.js'
export * from './turns.js'

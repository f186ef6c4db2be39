export * from './connections.js'

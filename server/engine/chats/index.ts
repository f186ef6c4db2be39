export * from './loop.js'
export * from './reply.js'

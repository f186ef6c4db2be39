export * from './llm.js'
export * from './spend.js'
export * from './provider.js'
export * from './prices.js'

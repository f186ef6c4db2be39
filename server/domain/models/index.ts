export * from './llm.js'
export * from './spend.js'

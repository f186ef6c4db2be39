export * from './enterprises.js'
export * from './setup.js'

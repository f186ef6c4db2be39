export * from './gates.js'

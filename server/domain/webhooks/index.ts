export * from './webhooks.js'

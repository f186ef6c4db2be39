export * from './catalog.js'
export * from './files.js'

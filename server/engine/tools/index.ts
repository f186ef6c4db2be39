export * from './mcp.js'
export * from './os-tools.js'

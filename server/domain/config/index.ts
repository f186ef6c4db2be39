// Configuration as code (issue 48; DESIGN 15): the enterprise as documents, and documents applied to it.
export { applyConfig, exportConfig, planConfig } from './apply.js'
export type { ConfigCaller, ConfigContext } from './model.js'

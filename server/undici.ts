// undici, for the modules that import() it where they first need it (egress.ts, the model calls'
// streams): its index is CommonJS, whose names an import() of it from the bundle would not give
// (scripts/bundle.mjs); this module's do.
export { Agent, buildConnector, fetch, request } from 'undici'

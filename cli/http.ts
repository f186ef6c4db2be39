import { createRequire } from 'node:module'
import type { Dispatcher } from 'undici'

// undici's requests for osctl, without the rest of undici. Its index loads every part it has (fetch,
// WebSocket, the HTTP caches with SQLite, the mocks, the proxy agents): 150-190 ms of a command's start
// here, of which a request needs 50-60. This loads what its index does for a request (the dispatcher
// with its API methods, the global agent) and sends with `Dispatcher.request`, undici's documented
// API. undici's package has no exports map, so these paths are its files as 7.x lays them out (pinned
// by the lock file); a version that moves them fails the first request of every CLI test.

let agent: Dispatcher | undefined

/** The dispatcher requests go through unless told: undici's global one, loaded once. */
export function defaultDispatcher(): Dispatcher {
  if (agent) return agent
  const require = createRequire(import.meta.url)
  const DispatcherClass = require('undici/lib/dispatcher/dispatcher') as { prototype: object }
  // As undici's index does: the request methods are the API's, put on every dispatcher.
  Object.assign(DispatcherClass.prototype, require('undici/lib/api'))
  const { getGlobalDispatcher } = require('undici/lib/global') as {
    getGlobalDispatcher(): Dispatcher
  }
  return (agent = getGlobalDispatcher())
}

/** undici's `request(url, options)`, through `dispatcher` or the default one. */
export function request(
  url: string,
  options: Omit<Dispatcher.RequestOptions, 'origin' | 'path'>,
  dispatcher: Dispatcher = defaultDispatcher(),
): Promise<Dispatcher.ResponseData> {
  const { origin, pathname, search } = new URL(url)
  return dispatcher.request({ ...options, origin, path: pathname + search })
}

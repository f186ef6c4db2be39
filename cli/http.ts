import type { Dispatcher } from 'undici'
import DispatcherClass from 'undici/lib/dispatcher/dispatcher.js'
import api from 'undici/lib/api/index.js'
import undiciGlobal from 'undici/lib/global.js'

// undici's requests for osctl, without the rest of undici. Its index loads every part it has (fetch,
// WebSocket, the HTTP caches with SQLite, the mocks, the proxy agents): 150-190 ms of a command's start
// here, of which a request needs 50-60 (25-35 from the bundle, scripts/bundle.mjs). This loads what
// its index does for a request (the dispatcher with its API methods, the global agent) and sends with
// `Dispatcher.request`, undici's documented API. undici's package has no exports map, so these paths
// are its files as 7.x lays them out (pinned by the lock file; typed in cli/undici-files.d.ts); a
// version that moves them fails the build.

let agent: Dispatcher | undefined

/** The dispatcher requests go through unless told: undici's global one, made once. */
export function defaultDispatcher(): Dispatcher {
  if (agent) return agent
  // As undici's index does: the request methods are the API's, put on every dispatcher.
  Object.assign(DispatcherClass.prototype, api)
  return (agent = undiciGlobal.getGlobalDispatcher())
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

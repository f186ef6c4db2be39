import { AsyncLocalStorage } from 'node:async_hooks'

// An environment per run of a command in process (test/helpers/osctl.ts, test/helpers/osd.ts), as a
// process of its own would have: the code of the run reads process.env, and sees the run's; runs that
// overlap never see each other's, and nothing is left set in the worker afterwards.

export const runEnv = new AsyncLocalStorage<NodeJS.ProcessEnv>()
/** The view installed, while it is process.env. */
let installedEnv: NodeJS.ProcessEnv | undefined

/**
 * process.env becomes a view of the environment of the run whose code reads it (the process's own
 * outside any run). Transparent outside runs. Installed again when process.env is another object:
 * vitest gives each file of a shared worker the environment back as it found it.
 */
function installRunEnv(): void {
  if (installedEnv && process.env === installedEnv) return
  const own = process.env
  const env = () => runEnv.getStore() ?? own
  process.env = installedEnv = new Proxy(own, {
    get: (_, key) => Reflect.get(env(), key),
    set: (_, key, value) =>
      Reflect.set(env(), key, typeof key === 'string' ? String(value) : value),
    has: (_, key) => Reflect.has(env(), key),
    deleteProperty: (_, key) => Reflect.deleteProperty(env(), key),
    ownKeys: () => Reflect.ownKeys(env()),
    getOwnPropertyDescriptor: (_, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(env(), key)
      return descriptor && { ...descriptor, configurable: true }
    },
    defineProperty: (_, key, descriptor) => Reflect.defineProperty(env(), key, descriptor),
  })
}

/** This process's environment (the run's, inside one) with `added` laid over it. */
export function environment(added: Record<string, string | undefined>): NodeJS.ProcessEnv {
  installRunEnv()
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const [key, value] of Object.entries(added)) {
    if (value === undefined) delete env[key]
    else env[key] = value
  }
  return env
}

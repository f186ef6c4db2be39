import { AsyncLocalStorage } from 'node:async_hooks'
import type { Command } from 'commander'

// An environment per run of a command in process (test/helpers/osctl.ts, test/helpers/osd.ts), as a
// process of its own would have: the code of the run reads process.env, and sees the run's; runs that
// overlap never see each other's, and nothing is left set in the worker afterwards.

export const runEnv = new AsyncLocalStorage<NodeJS.ProcessEnv>()
/** The view installed, while it is process.env. */
let installedEnv: NodeJS.ProcessEnv | undefined

/**
 * process.env becomes a view of the environment of the run whose code reads it (the process's own
 * outside any run). Transparent outside runs. Installed again when process.env is another object:
 * a file or a test may assign process.env another object.
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

/** Every command of the tree, the program first. */
function commands(command: Command): Command[] {
  return [command, ...command.commands.flatMap(commands)]
}

/**
 * Commander's own output (its help, its usage errors) of every command of the tree written to the
 * run's stdout and stderr, as a process whose stdout and stderr are not terminals has it.
 */
export function commanderOutputTo(
  program: Command,
  io: { stdout: { write(text: string): unknown }; stderr: { write(text: string): unknown } },
): void {
  for (const command of commands(program))
    command.configureOutput({
      writeOut: (text) => void io.stdout.write(text),
      writeErr: (text) => void io.stderr.write(text),
      // What commander uses when its output is not a terminal.
      getOutHelpWidth: () => 80,
      getErrHelpWidth: () => 80,
      getOutHasColors: () => false,
      getErrHasColors: () => false,
    })
}

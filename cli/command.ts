import { readFile } from 'node:fs/promises'
import type { Command } from 'commander'
import type { Deps, GlobalOptions } from './deps.js'
import { CliError, UsageError, exitCodes } from './errors.js'

export type MakeDeps = (globals: GlobalOptions) => Deps

/**
 * Turns a plain `async (deps, ...args, opts)` function into a commander action, building deps from the
 * global flags. Actions stay callable from tests with their own deps (gh's runF).
 */
export function actionOf<A extends unknown[]>(
  makeDeps: MakeDeps,
  fn: (deps: Deps, ...args: A) => Promise<void>,
): (...params: unknown[]) => Promise<void> {
  return async (...params) => {
    const command = params.at(-1) as Command
    const deps = makeDeps(command.optsWithGlobals<GlobalOptions>())
    await fn(deps, ...(params.slice(0, -1) as A))
  }
}

/** Adds an Examples section to a command's --help. */
export function examples(command: Command, ...lines: string[]): Command {
  return command.addHelpText('after', `\nExamples:\n${lines.map((l) => `  $ ${l}`).join('\n')}\n`)
}

/**
 * A request body from `-d JSON` or `-f FILE` (`-f -` reads stdin), the same on every verb that sends
 * one. Returns undefined when neither is given.
 */
export async function readBody(
  deps: Deps,
  opts: { data?: string; file?: string },
): Promise<unknown> {
  if (opts.data !== undefined && opts.file !== undefined)
    throw new UsageError('give -d or -f, not both')
  const text =
    opts.data !== undefined
      ? opts.data === '-'
        ? await deps.stdin()
        : opts.data
      : opts.file !== undefined
        ? opts.file === '-'
          ? await deps.stdin()
          : await readFile(opts.file, 'utf8').catch((err: NodeJS.ErrnoException) => {
              throw new UsageError(`cannot read ${opts.file}: ${err.code ?? err.message}`)
            })
        : undefined
  if (text === undefined) return undefined
  try {
    return JSON.parse(text)
  } catch (err) {
    throw new UsageError(`the body is not valid JSON: ${(err as Error).message}`)
  }
}

/** Destructive verbs ask on a terminal and need --yes otherwise (STYLE: gh repo delete). */
export async function confirmDestructive(
  deps: Deps,
  yes: boolean | undefined,
  what: string,
): Promise<void> {
  if (yes) return
  if (!(await deps.confirm(`${what}?`))) {
    throw new CliError(
      process.stdin.isTTY ? 'cancelled' : `${what}: refusing without --yes when not on a terminal`,
      exitCodes.usage,
    )
  }
}

import { readFile } from 'node:fs/promises'
import type { Command } from 'commander'
import type { Deps, GlobalOptions } from './deps.js'
import { CliError, UsageError, exitCodes } from './errors.js'

/**
 * May answer a promise: osctl's own loads the client and the profile store only when an action runs.
 * `command` is the name under osctl of the command acting (`runs` for `osctl runs list`).
 */
export type MakeDeps = (globals: GlobalOptions, command?: string) => Deps | Promise<Deps>

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
    const globals = command.optsWithGlobals<GlobalOptions>()
    const deps = await makeDeps(globals, commandName(command))
    const args = params.slice(0, -1) as A
    try {
      if (globals.jq === undefined) return await fn(deps, ...args)
      // Loaded only with --jq: its WebAssembly costs nothing to the commands that do not ask for it.
      const { withJq } = await import('./jq.js')
      await withJq(deps, globals.jq, (jqDeps) => fn(jqDeps, ...args))
    } finally {
      await warnOfExpiry(deps)
    }
  }
}

const day = 24 * 3600 * 1000

/**
 * Once a day per profile, on stderr: the API token the command used expires within 7 days (the daemon
 * says when on every answer to such a token: x-osd-token-expires-at). Never fails the command.
 */
export async function warnOfExpiry(deps: Deps, now = Date.now()): Promise<void> {
  try {
    const expiresAt = deps.client().tokenExpiresAt
    if (!expiresAt) return
    const left = Date.parse(expiresAt) - now
    if (!(left < 7 * day)) return
    const profile = deps.target().profile
    // When the warning was last given is kept with the profiles, which a pipeline's osctl has not
    // loaded (cli/deps.ts loadDeps).
    await (await import('./profiles.js')).loadProfileStore()
    if (!deps.profiles().warningDue(`token-expiry:${profile}`, day, now)) return
    const when =
      left <= 0
        ? 'has expired'
        : `expires ${expiresAt} (in ${Math.max(1, Math.round(left / day))} days or less)`
    deps.out.error(
      `warning: the API token of profile "${profile}" ${when}: a person rotates it, or changes its expiry, ` +
        'with `osctl tokens rotate` or `osctl tokens update --expires`\n',
    )
  } catch {
    // A warning never makes a command fail.
  }
}

/** The name under osctl of `command` (`runs` for `osctl runs list`). */
function commandName(command: Command): string {
  let top = command
  while (top.parent?.parent) top = top.parent
  return top.name()
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
  const answer = await deps.confirm(`${what}?`)
  if (answer) return
  throw new CliError(
    answer === undefined ? `${what}: refusing without --yes when not on a terminal` : 'cancelled',
    exitCodes.usage,
  )
}

/**
 * A request body from -d/-f with the given flag values laid over it (flags left unset are not sent).
 * `null` is sent as null, for fields a verb lets the user clear (`--lead none`).
 */
export async function bodyWith(
  deps: Deps,
  opts: { data?: string; file?: string },
  fields: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const base = (await readBody(deps, opts)) ?? {}
  if (typeof base !== 'object' || Array.isArray(base))
    throw new UsageError('the body must be a JSON object')
  const set = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined))
  return { ...(base as Record<string, unknown>), ...set }
}

/** Adds -d and -f to a command that sends a body. */
export function withBodyOptions(command: Command): Command {
  return command
    .option('-d, --data <json>', 'request body as JSON ("-" reads stdin)')
    .option('-f, --file <file>', 'request body from a JSON file ("-" reads stdin)')
}

/** A whole number from a flag, or null for "none". */
export function intOrNone(value: string): number | null {
  if (value === 'none') return null
  const n = Number(value)
  if (!Number.isInteger(n))
    throw new UsageError(`expected a whole number or "none"; got "${value}"`)
  return n
}

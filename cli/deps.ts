import { createInterface } from 'node:readline/promises'
import { Writable } from 'node:stream'
import { ApiClient } from './client.js'
import { CliError, UsageError, exitCodes } from './errors.js'
import { terminalOutput, type Output } from './output.js'
import {
  loadProfileStore,
  ProfileStore,
  profileStoreLoaded,
  resolveTarget,
  type Target,
} from './profiles.js'
import { didYouMean } from './suggest.js'

export interface GlobalOptions {
  url?: string
  token?: string
  profile?: string
  json?: boolean
  /** A jq expression the JSON a command prints goes through (cli/jq.ts); implies json. */
  jq?: string
}

/**
 * What every command action gets (gh's Factory): the client, the target, the profiles, output, a prompt.
 * Tests build their own with a captured output and a client of their choosing.
 */
export interface Deps {
  out: Output
  globals: GlobalOptions
  target(): Target
  client(): ApiClient
  /** A client of another daemon or credential than the target's (sign-in, sign-out of a profile). */
  connect(url: string, token?: string): ApiClient
  profiles(): ProfileStore
  /**
   * Asks on a terminal (the answer typed on stdin, the question on stderr): true for yes, false for
   * no, undefined when there is no terminal to ask on. Never answers yes by itself.
   */
  confirm(question: string): Promise<boolean | undefined>
  /**
   * Asks for a secret on a terminal without echoing what is typed; undefined when there is no terminal
   * to ask on (the caller then needs the secret from stdin).
   */
  password(question: string): Promise<string | undefined>
  /** Reads all of standard input (for `-f -`). */
  stdin(): Promise<string>
  /**
   * Calls `listener` on Ctrl+C (SIGINT) instead of letting it end the process, until the function
   * answered is called: a follow of a run then says how to follow it again (issue 51).
   */
  onInterrupt(listener: () => void): () => void
}

/**
 * The target, unless it is of a profile named by --profile or OSCTL_PROFILE that does not exist (issue
 * 51): a typo would otherwise send to the default URL without a token. Refused (exit 2) naming it and
 * the profiles there are. `auth login --profile NEW` makes a profile and reads no target.
 */
function knownProfile(globals: GlobalOptions, target: Target, store: () => ProfileStore): Target {
  const named = globals.profile || process.env.OSCTL_PROFILE
  if (!named || store().get(named)) return target
  const names = store()
    .list()
    .map((p) => p.name)
  const from = globals.profile ? '--profile' : 'OSCTL_PROFILE'
  throw new UsageError(
    `no profile "${named}" (${from})${didYouMean(named, names)}: ` +
      (names.length
        ? `the profiles are ${names.map((n) => `"${n}"`).join(', ')}`
        : 'there are none yet; make one with `osctl auth login --profile NAME`'),
  )
}

/** Where a question is typed (stdin) and asked (stderr); tests give their own. */
export interface Terminal {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean }
  stderr: NodeJS.WritableStream & { isTTY?: boolean }
}

/** The profiles of a command that reads none. */
const noProfiles = { get: () => undefined, current: undefined }

/**
 * The commands that read or write profiles whatever gives the URL and the token (a sign-in saves one;
 * `profile list` lists them). Others read one only for the target (and `warnOfExpiry`, which loads the
 * store itself).
 */
const profileCommands = ['auth', 'profile']

/**
 * Deps for `command` (its name under osctl) acting: the profile store is loaded first unless the
 * command reads no profile, which saves a pipeline's osctl about 200 ms a command (cli/profiles.ts).
 */
export async function loadDeps(globals: GlobalOptions, command?: string): Promise<Deps> {
  const env = process.env
  const given =
    (globals.url || env.OSCTL_URL) &&
    (globals.token || env.OSCTL_TOKEN) &&
    !(globals.profile || env.OSCTL_PROFILE)
  if (!given || command === undefined || profileCommands.includes(command)) await loadProfileStore()
  return makeDeps(globals)
}

export function makeDeps(
  globals: GlobalOptions,
  terminal: Terminal = { stdin: process.stdin, stderr: process.stderr },
): Deps {
  let store: ProfileStore | undefined
  const profiles = () => (store ??= new ProfileStore())
  let target: Target | undefined
  // Not loaded (loadDeps): the flags or the environment give the URL and the token, and no profile is
  // named, so none is read; the target's profile is then the default's name.
  const resolve = () =>
    (target ??= knownProfile(
      globals,
      resolveTarget(globals, profileStoreLoaded() ? profiles() : noProfiles),
      profiles,
    ))
  let client: ApiClient | undefined
  return {
    out: terminalOutput(Boolean(globals.json)),
    globals,
    target: resolve,
    client: () =>
      (client ??= new ApiClient(resolve().url, resolve().token, undefined, resolve().urlFrom)),
    connect: (url, token) => new ApiClient(url, token),
    profiles,
    async confirm(question) {
      // Both: the answer is typed on stdin, but the question is asked on stderr, which must be seen.
      if (!terminal.stdin.isTTY || !terminal.stderr.isTTY) return undefined
      const rl = createInterface({ input: terminal.stdin, output: terminal.stderr })
      try {
        const answer = await rl.question(`${question} [y/N] `)
        return /^y(es)?$/i.test(answer.trim())
      } finally {
        rl.close()
      }
    },
    async password(question) {
      if (!terminal.stdin.isTTY || !terminal.stderr.isTTY) return undefined
      // A terminal readline whose echo goes nowhere: it puts the terminal in raw mode, so nothing typed
      // is shown, and Ctrl-C reaches it as SIGINT. Asked once it is: nothing typed before then echoes.
      const silent = new Writable({ write: (_chunk, _encoding, done) => done() })
      const rl = createInterface({ input: terminal.stdin, output: silent, terminal: true })
      terminal.stderr.write(question)
      const cancelled = new AbortController()
      rl.on('SIGINT', () => cancelled.abort())
      try {
        return await rl.question('', { signal: cancelled.signal })
      } catch (err) {
        if (cancelled.signal.aborted) throw new CliError('cancelled', exitCodes.usage)
        throw err
      } finally {
        rl.close()
        terminal.stderr.write('\n')
      }
    },
    async stdin() {
      if (process.stdin.isTTY)
        throw new UsageError('expected input on stdin (for "-"), but stdin is a terminal')
      const chunks: Buffer[] = []
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
      return Buffer.concat(chunks).toString('utf8')
    },
    onInterrupt(listener) {
      process.on('SIGINT', listener)
      return () => void process.off('SIGINT', listener)
    },
  }
}

import { createInterface } from 'node:readline/promises'
import { ApiClient } from './client.js'
import { UsageError } from './errors.js'
import { terminalOutput, type Output } from './output.js'
import { ProfileStore, resolveTarget, type Target } from './profiles.js'

export interface GlobalOptions {
  url?: string
  token?: string
  profile?: string
  json?: boolean
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
  profiles(): ProfileStore
  /**
   * Asks on a terminal (the answer typed on stdin, the question on stderr): true for yes, false for
   * no, undefined when there is no terminal to ask on. Never answers yes by itself.
   */
  confirm(question: string): Promise<boolean | undefined>
  /** Reads all of standard input (for `-f -`). */
  stdin(): Promise<string>
}

/** Where a question is typed (stdin) and asked (stderr); tests give their own. */
export interface Terminal {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean }
  stderr: NodeJS.WritableStream & { isTTY?: boolean }
}

export function makeDeps(
  globals: GlobalOptions,
  terminal: Terminal = { stdin: process.stdin, stderr: process.stderr },
): Deps {
  let store: ProfileStore | undefined
  const profiles = () => (store ??= new ProfileStore())
  let target: Target | undefined
  const resolve = () => (target ??= resolveTarget(globals, profiles()))
  let client: ApiClient | undefined
  return {
    out: terminalOutput(Boolean(globals.json)),
    globals,
    target: resolve,
    client: () => (client ??= new ApiClient(resolve().url, resolve().token)),
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
    async stdin() {
      if (process.stdin.isTTY)
        throw new UsageError('expected input on stdin (for "-"), but stdin is a terminal')
      const chunks: Buffer[] = []
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
      return Buffer.concat(chunks).toString('utf8')
    },
  }
}

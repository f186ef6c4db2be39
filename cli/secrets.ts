import type { Deps } from './deps.js'
import { UsageError } from './errors.js'

/**
 * A secret (a model key, a tool server's token) from its flag, or from stdin, which keeps it out of
 * shell history and process lists. Surrounding whitespace (the newline of `echo`) is dropped. osctl
 * never prints a secret: the API answers only its last characters, or whether one is kept.
 */
export async function readSecret(
  deps: Deps,
  given: { value?: string; stdin?: boolean },
  flags: { value: string; stdin: string },
): Promise<string | undefined> {
  if (given.value !== undefined && given.stdin)
    throw new UsageError(`give ${flags.value} or ${flags.stdin}, not both`)
  if (!given.stdin) return given.value
  const secret = (await deps.stdin()).trim()
  if (!secret) throw new UsageError(`${flags.stdin}: nothing on stdin`)
  return secret
}

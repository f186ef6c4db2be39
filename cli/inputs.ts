import { unsetRequiredInputs, type DeclaredInput } from '../shared/task-inputs.js'
import { readBody } from './command.js'
import type { Deps } from './deps.js'
import { UsageError } from './errors.js'
import { didYouMean } from './suggest.js'

/** Commander's collector for a repeatable option (`--input a=1 --input b=2`). */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value]
}

/**
 * A flag value read as JSON when it parses (`true`, `null`, `{"x":1}`, `"quoted"`), else kept as the
 * string. A number only when it reads back as typed: `7` and `-2.5` are numbers, but `1.10` (a version),
 * `1e3` and `12345678901234567890` (an id JSON would round) stay the strings they were.
 */
export function jsonOrString(text: string): unknown {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return text
  }
  return typeof value === 'number' && String(value) !== text.trim() ? text : value
}

/** `key=value` pairs as one object; a later pair of the same key wins. `flag` names them in errors. */
export function parseInputs(pairs: readonly string[], flag = '--input'): Record<string, unknown> {
  return Object.fromEntries(
    pairs.map((pair) => {
      const at = pair.indexOf('=')
      if (at < 1) throw new UsageError(`${flag} takes key=value; got "${pair}"`)
      return [pair.slice(0, at), jsonOrString(pair.slice(at + 1))]
    }),
  )
}

/**
 * A run's input (or a schedule's): the JSON object of -d or -f, with the --input pairs laid over it.
 * Nothing given is an empty object.
 */
export async function readInput(
  deps: Deps,
  opts: { data?: string; file?: string; input?: string[] },
): Promise<Record<string, unknown>> {
  const body = await readBody(deps, opts)
  const base = body === undefined ? {} : body
  if (typeof base !== 'object' || base === null || Array.isArray(base))
    throw new UsageError('the input must be a JSON object')
  return { ...(base as Record<string, unknown>), ...parseInputs(opts.input ?? []) }
}

/** A declared input as the check reads it (spec: Task definition, inputs). */
export interface DeclaredRunInput extends DeclaredInput {
  type?: string
}

/**
 * What `runs start` refuses before sending (issue 51): a required input given no value and a key the
 * task does not declare (with the declared key it is likely a typo of). The API keeps the spec's
 * rule, the body is the input as sent; this only saves a run that would start without what it needs.
 * A task that declares no inputs takes any input.
 */
export function checkRunInput(
  task: string,
  declared: readonly DeclaredRunInput[] | null | undefined,
  input: Record<string, unknown>,
): void {
  if (!declared?.length) return
  const keys = declared.map((d) => d.key)
  const problems: string[] = []
  const missing = unsetRequiredInputs(declared, input)
  if (missing.length)
    problems.push(`missing required input${missing.length > 1 ? 's' : ''} ${quoted(missing)}`)
  for (const key of Object.keys(input).filter((k) => !keys.includes(k)))
    problems.push(`unknown input "${key}"${didYouMean(key, keys)}`)
  if (problems.length === 0) return
  const list = declared
    .map(
      (d) =>
        `${d.key} (${[d.type, d.required ? 'required' : 'optional'].filter(Boolean).join(', ')})`,
    )
    .join(', ')
  throw Object.assign(new UsageError(`task ${task}: ${problems.join('; ')}; it declares ${list}`), {
    hint: 'give the declared inputs with --input KEY=VALUE, or send the input as it is with --no-input-check',
  })
}

const quoted = (keys: string[]) => keys.map((k) => `"${k}"`).join(', ')

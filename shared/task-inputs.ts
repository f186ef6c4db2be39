// A task's declared inputs (spec: Task definition, inputs) against an input given for its runs: what
// the daemon decides a schedule on (a catalogue install turns a schedule on only when nothing is
// missing; issue 51) and what osctl says about it. No zod: osctl loads this as it starts.

/** A declared input as far as this needs it. */
export interface DeclaredInput {
  key: string
  required?: boolean
}

/** A value a run can work with: given, not null, and not blank text. */
export function hasValue(value: unknown): boolean {
  if (value === undefined || value === null) return false
  return typeof value !== 'string' || value.trim() !== ''
}

/**
 * The keys of the required inputs `input` gives no value, in their declared order: runs started with
 * it would start without them. (A declared default is not a value: osd does not fill one in.)
 */
export function unsetRequiredInputs(
  inputs: readonly DeclaredInput[] | null | undefined,
  input: Record<string, unknown> | null | undefined,
): string[] {
  return (inputs ?? [])
    .filter((declared) => declared.required && !hasValue(input?.[declared.key]))
    .map((declared) => declared.key)
}

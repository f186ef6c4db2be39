import type { z } from 'zod'

// A document's spec in its one written form (issue 48: export is stable): the fields in the order its
// schema declares them, a record's keys sorted, and every field whose value is its schema's default left
// out, at any depth. The same function shows what osd holds and what a file asks for, so two specs mean
// the same exactly when their canonical forms are equal, and an export of an unchanged enterprise is
// the same bytes every time.

type Def = {
  type: string
  innerType?: z.ZodType
  defaultValue?: unknown
  shape?: Record<string, z.ZodType>
  element?: z.ZodType
  valueType?: z.ZodType
  catchall?: z.ZodType
}

const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def

/** The schema under its wrappers (default, optional, nullable), and its default if it has one. */
function unwrap(schema: z.ZodType): { inner: z.ZodType; hasDefault: boolean; value?: unknown } {
  let inner = schema
  let found: { value: unknown } | undefined
  for (;;) {
    const def = defOf(inner)
    if (def.type === 'default' || def.type === 'prefault') {
      found ??= {
        value:
          typeof def.defaultValue === 'function'
            ? (def.defaultValue as () => unknown)()
            : def.defaultValue,
      }
      inner = def.innerType!
    } else if (def.type === 'optional' || def.type === 'nullable' || def.type === 'readonly') {
      inner = def.innerType!
    } else break
  }
  return found ? { inner, hasDefault: true, value: found.value } : { inner, hasDefault: false }
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** Two JSON values equal, whatever the order of their objects' keys. */
export function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b))
}

/** A JSON value with every object's keys in code-point order. */
export function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted)
  if (!isPlainObject(value)) return value
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(value).sort()) out[key] = sorted(value[key])
  return out
}

/**
 * `value` as `schema` writes it: an object's declared fields in their order, then any others it keeps
 * (a loose object's) sorted; a record's keys sorted; a field equal to its default left out. Values the
 * schema says nothing of (unknown, a JSON object) keep their keys sorted, so they compare and print
 * the same however they came.
 */
export function canonical(schema: z.ZodType, value: unknown): unknown {
  if (value === undefined || value === null) return value
  const { inner } = unwrap(schema)
  const def = defOf(inner)
  if (def.type === 'object' && isPlainObject(value)) {
    const shape = def.shape ?? {}
    const out: Record<string, unknown> = {}
    for (const [key, field] of Object.entries(shape)) {
      if (!(key in value)) continue
      const shown = canonical(field, value[key])
      if (shown === undefined) continue
      const { hasDefault, value: fallback } = unwrap(field)
      if (hasDefault && sameJson(shown, canonical(field, fallback))) continue
      out[key] = shown
    }
    for (const key of Object.keys(value).sort()) {
      if (key in shape || value[key] === undefined) continue
      out[key] = sorted(value[key])
    }
    return out
  }
  if (def.type === 'record' && isPlainObject(value)) {
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort())
      out[key] = def.valueType ? canonical(def.valueType, value[key]) : sorted(value[key])
    return out
  }
  if (def.type === 'array' && Array.isArray(value))
    return value.map((item) => (def.element ? canonical(def.element, item) : sorted(item)))
  return sorted(value)
}

import type { z } from 'zod'
import {
  ConfigMetadata,
  configApiVersion,
  configKinds,
  configSpecs,
  layeredKinds,
  type ConfigKind,
} from '../../../shared/schemas/config.js'
import { invalidDocument, type Parsed } from './model.js'

// The documents of a plan or an apply, each checked as a whole before anything is read or written: the
// first fault found answers 400 config_document_invalid naming the document (its index, kind and name)
// and the field, with every fault of that document listed in `issues`.

const envelopeFields = ['apiVersion', 'kind', 'metadata', 'spec']

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** A zod issue's field, under `prefix`: a key it does not know is named itself. */
function fieldsOf(prefix: string, error: z.ZodError): { field: string; message: string }[] {
  return error.issues.flatMap((issue) => {
    const at = [prefix, ...issue.path.map(String)].join('.')
    if (issue.code === 'unrecognized_keys')
      return issue.keys.map((key) => ({ field: `${at}.${key}`, message: 'unknown field' }))
    return [{ field: at, message: issue.message }]
  })
}

/** The identity of a document: its kind, its layer and its name. */
export const keyOf = (d: { kind: string; layer: string | null; name: string }) =>
  `${d.kind}\u0000${d.layer ?? ''}\u0000${d.name}`

export function parseDocuments(raw: unknown[]): Parsed[] {
  const seen = new Map<string, number>()
  return raw.map((value, index) => {
    if (!isObject(value))
      throw invalidDocument(
        { index },
        '(document)',
        'a document is an object: apiVersion, kind, metadata, spec',
      )
    const unknown = Object.keys(value).find((key) => !envelopeFields.includes(key))
    if (unknown !== undefined) throw invalidDocument({ index }, unknown, 'unknown field')
    if (value.apiVersion !== configApiVersion)
      throw invalidDocument({ index }, 'apiVersion', `must be ${configApiVersion}`)
    if (!configKinds.includes(value.kind as ConfigKind))
      throw invalidDocument({ index }, 'kind', `one of ${configKinds.join(', ')}`)
    const kind = value.kind as ConfigKind
    const metadata = ConfigMetadata.safeParse(value.metadata)
    if (!metadata.success) {
      const [first] = fieldsOf('metadata', metadata.error)
      throw invalidDocument({ index, kind }, first!.field, first!.message)
    }
    const { name } = metadata.data
    const layer = metadata.data.layer ?? null
    const at = { index, kind, name, layer }
    if (layer !== null && !layeredKinds.includes(kind))
      throw invalidDocument(
        at,
        'metadata.layer',
        `only ${layeredKinds.join(' and ')} are connected at a layer`,
      )
    const spec = configSpecs[kind].safeParse(value.spec ?? {})
    if (!spec.success) {
      const issues = fieldsOf('spec', spec.error)
      const error = invalidDocument(at, issues[0]!.field, issues[0]!.message)
      Object.assign(error.extra!, { issues })
      throw error
    }
    const key = keyOf(at)
    const earlier = seen.get(key)
    if (earlier !== undefined)
      throw invalidDocument(
        at,
        'metadata.name',
        `documents[${earlier}] describes the same ${kind}${layer ? ` on ${layer}` : ''}`,
      )
    seen.set(key, index)
    return { ...at, spec: spec.data as Record<string, unknown> }
  })
}

import { createHash } from 'node:crypto'
import { ApiError } from '../../../shared/errors.js'
import { cleanSlug, maxSlugLength } from '../../../shared/slug.js'
import type { ConfigKind } from '../../../shared/schemas/config.js'
import type { Sealer } from '../../crypto.js'
import type { Db } from '../../db/sql.js'
import type { EgressRule } from '../../egress.js'

// What the kinds of document share (issue 48): who asks, the objects as they are, the names they are
// known by, and how a document is said to be wrong.

/** Who asks, as the route knows it: never the request itself. */
export interface ConfigCaller {
  /** A token's scopes; a person's session holds every scope. */
  scopes: ReadonlySet<string>
  /** The chief executive (a signed-in owner) binds tool connections on the enterprise and sets mustGate. */
  mayBindEnterprise: boolean
}

export interface ConfigContext {
  enterpriseId: string
  /** Members' addresses are <name-slug>@<enterprise-slug>.<mailDomain>. */
  mailDomain: string
  sealer: Sealer
  egress: EgressRule
  caller: ConfigCaller
}

/** An object of the enterprise as it is: its document's identity, its whole spec, and its record. */
export interface Live {
  kind: ConfigKind
  name: string
  layer: string | null
  /** Every field, defaults included; what its document shows is canonical() of it. */
  spec: Record<string, unknown>
  /** The record's id: a team's, a task's, a connection's; the enterprise's for one of a kind. */
  id: string
  /** A secret kept with it (a tool server's token, a model key): whether a value is the one kept. */
  secret?: (candidate: string) => Promise<boolean>
  /** What a change of it is guarded with: a task's current version (409 task_version_conflict). */
  revision?: string
  /** Its spec.tokenFrom is a name derivedEnvName made up (no apply recorded one): uniqueSecretNames. */
  derivedSecret?: boolean
}

/**
 * Names -> records, as the apply goes: what osd holds, then each object made or removed. The
 * service's own tasks and roles are here (documents may name them) though they have no document.
 */
export interface Refs {
  enterprise: { id: string; slug: string }
  teams: Map<string, string>
  members: Map<string, string>
  /** `slug` (enterprise-wide) or `team/slug`. */
  roles: Map<string, { id: string; teamId: string | null; builtin: boolean }>
  tasks: Map<string, { id: string; builtin: boolean }>
}

/** The names each kind will have once the documents are applied: what references are checked against. */
export interface World {
  teams: Set<string>
  members: Set<string>
  roles: Set<string>
  tasks: Set<string>
}

/** A document, checked against its kind's schema. */
export interface Parsed {
  index: number
  kind: ConfigKind
  name: string
  layer: string | null
  /** The schema's output: defaults filled. */
  spec: Record<string, unknown>
}

/** A document found wrong, by where: 400 config_document_invalid naming the document and the field. */
export class DocumentError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message)
  }
}

export function invalidDocument(
  doc: { index: number; kind?: string; name?: string; layer?: string | null },
  field: string,
  message: string,
): ApiError {
  const what = doc.kind ? ` (${doc.kind}${doc.name ? ` ${doc.name}` : ''})` : ''
  return new ApiError(
    'config_document_invalid',
    `documents[${doc.index}]${what}: ${field}: ${message}`,
    {
      document: {
        index: doc.index,
        kind: doc.kind ?? null,
        name: doc.name ?? null,
        layer: doc.layer ?? null,
      },
      field,
    },
  )
}

/** A layer as metadata.layer names it: `team/<slug>`, `member/<name>`, `role/<role>`, `task/<slug>`. */
export type LayerKind = 'enterprise' | 'team' | 'member' | 'role' | 'task'

export function parseLayer(layer: string | null): { kind: LayerKind; ref: string } {
  if (layer === null) return { kind: 'enterprise', ref: '' }
  const cut = layer.indexOf('/')
  return { kind: layer.slice(0, cut) as LayerKind, ref: layer.slice(cut + 1) }
}

/** The id of a layer's owner, or undefined when the refs hold none of that name. */
export function layerId(refs: Refs, layer: string | null): string | undefined {
  const { kind, ref } = parseLayer(layer)
  switch (kind) {
    case 'enterprise':
      return refs.enterprise.id
    case 'team':
      return refs.teams.get(ref)
    case 'member':
      return refs.members.get(ref)
    case 'role':
      return refs.roles.get(ref)?.id
    case 'task':
      return refs.tasks.get(ref)?.id
  }
}

/** A layer's name for an owner's id, or undefined when it names nothing the refs hold. */
export function layerName(
  refs: Refs,
  kind: LayerKind,
  id: string | null,
): string | null | undefined {
  if (kind === 'enterprise') return null
  const find = <V>(map: Map<string, V>, match: (v: V) => boolean) => {
    for (const [name, value] of map) if (match(value)) return `${kind}/${name}`
    return undefined
  }
  switch (kind) {
    case 'team':
      return find(refs.teams, (v) => v === id)
    case 'member':
      return find(refs.members, (v) => v === id)
    case 'role':
      return find(refs.roles, (v) => v.id === id)
    case 'task':
      return find(refs.tasks, (v) => v.id === id)
  }
}

/** Whether a layer names something that will exist: 400 naming metadata.layer otherwise. */
export function checkLayer(world: World, layer: string | null, allowed: LayerKind[]): void {
  const { kind, ref } = parseLayer(layer)
  if (!allowed.includes(kind))
    throw new DocumentError(
      'metadata.layer',
      `a ${kind} layer is not one this kind is connected at (${allowed.join(', ')})`,
    )
  const names: Record<Exclude<LayerKind, 'enterprise'>, Set<string>> = {
    team: world.teams,
    member: world.members,
    role: world.roles,
    task: world.tasks,
  }
  if (kind !== 'enterprise' && !names[kind].has(ref))
    throw new DocumentError('metadata.layer', `no ${kind} "${ref}" here or among the documents`)
}

/** What writing an object needs: the transaction, who asks, the names as they are now, the secrets. */
export interface Writer {
  db: Db
  ctx: ConfigContext
  refs: Refs
  /** The values of env:NAME, by NAME, as osctl sent them. */
  secrets: Record<string, string>
}

/** A secret's value for a change that writes it: 400 config_secret_missing when osctl did not send it. */
export function secretValue(w: Writer, ref: string): string {
  const name = ref.slice('env:'.length)
  const value = w.secrets[name]
  if (value === undefined)
    throw new DocumentError(
      'spec.tokenFrom',
      `${ref} is not set: osctl sends the value of ${name} from its environment`,
    )
  return value
}

/** The variable an export names for a secret kept without a source: OSD_<what>_<layer>_<name>. */
export function derivedEnvName(
  prefix: string,
  layer: string | null,
  name: string,
  suffix = '',
): string {
  const { kind, ref } = parseLayer(layer)
  const parts = [prefix, ...(kind === 'enterprise' ? [] : [kind, ref]), name, suffix].filter(
    Boolean,
  )
  return `env:${parts
    .join('_')
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .toUpperCase()
    .replace(/[^A-Z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')}`
}

/**
 * Makes each derived secret variable that another object also names unique, by a suffix of its own
 * (`_` and six hex digits): derivedEnvName folds case and punctuation, so gh-api and gh_api on one
 * team, or team_engineering_crm on the enterprise and crm on team engineering, meet on one name, and
 * applying the export would give both connections one value: one tool server's token sent to another.
 * Every object on a shared derived name gets the suffix and none keeps the bare name, so a variable
 * set for it before matches none of them rather than the wrong one; names that meet no other stay as
 * they were (exports unchanged). The suffix is a hash of the object's identity: the same at every
 * export. A name an apply recorded stays even when shared: the user wrote it so.
 */
export function uniqueSecretNames(live: Live[]): void {
  const count = new Map<string, number>()
  for (const { spec } of live)
    if (typeof spec.tokenFrom === 'string')
      count.set(spec.tokenFrom, (count.get(spec.tokenFrom) ?? 0) + 1)
  const taken = new Set(count.keys())
  for (const object of live) {
    const name = object.spec.tokenFrom as string
    if (!object.derivedSecret || count.get(name) === 1) continue
    const digest = createHash('sha256')
      .update(`${object.kind}\0${object.layer ?? ''}\0${object.name}`)
      .digest('hex')
      .toUpperCase()
    let unique = `${name}_${digest.slice(0, 6)}`
    for (let length = 8; taken.has(unique); length += 2)
      unique = `${name}_${digest.slice(0, length)}`
    taken.add(unique)
    object.spec.tokenFrom = unique
  }
}

/** 403 api_token_scope naming the scope, unless the caller holds it. */
export function requireScope(caller: ConfigCaller, scope: string, why: string): void {
  if (caller.scopes.has(scope)) return
  throw new ApiError(
    'api_token_scope',
    `${why} needs the scope ${scope}; the token holds ${[...caller.scopes].join(', ') || 'none'}.`,
    { needed: scope, held: [...caller.scopes] },
  )
}

/** A name that is a slug as osd cleans it (lower case, digits, hyphens): 400 naming metadata.name. */
export function requireSlug(name: string, field = 'metadata.name'): void {
  const clean = cleanSlug(name)
  if (clean !== name || clean.length === 0 || clean.length > maxSlugLength)
    throw new DocumentError(
      field,
      `"${name}" is not a slug (lower-case letters, digits and single hyphens, at most ${maxSlugLength})${clean && clean !== name ? `; did you mean "${clean}"?` : ''}`,
    )
}

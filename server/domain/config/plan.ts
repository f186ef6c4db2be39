import { createHash } from 'node:crypto'
import { ApiError } from '../../../shared/errors.js'
import {
  configApiVersion,
  configKinds,
  configSpecs,
  singletonKinds,
  type ConfigChange,
  type ConfigDocument,
  type ConfigKind,
} from '../../../shared/schemas/config.js'
import type { Db } from '../../db/sql.js'
import { canonical, sameJson } from './canonical.js'
import { keyOf } from './documents.js'
import { kinds, type DesireContext } from './kinds/index.js'
import {
  DocumentError,
  invalidDocument,
  requireScope,
  type ConfigCaller,
  type ConfigContext,
  type Live,
  type Parsed,
  type Refs,
  type World,
  uniqueSecretNames,
} from './model.js'
import { readSnapshot, refsOf, type Snapshot } from './snapshot.js'

// What the documents would change, object by object (issue 48): create, update (the fields that change,
// old and new), delete (only with prune), unchanged; and the base, a hash of the enterprise's
// documents, naming the state planned against.

/** The enterprise as documents, and what writing to it needs. */
export interface State {
  snapshot: Snapshot
  refs: Refs
  live: Live[]
  documents: ConfigDocument[]
  base: string
  desire: DesireContext
}

const kindOrder = new Map(configKinds.map((kind, i) => [kind, i]))

/** Kind order, then name, then layer, compared by code point: the same order wherever it runs. */
function byIdentity(
  a: { kind: ConfigKind; name: string; layer: string | null },
  b: { kind: ConfigKind; name: string; layer: string | null },
): number {
  const kind = kindOrder.get(a.kind)! - kindOrder.get(b.kind)!
  if (kind !== 0) return kind
  if (a.name !== b.name) return a.name < b.name ? -1 : 1
  const [la, lb] = [a.layer ?? '', b.layer ?? '']
  return la === lb ? 0 : la < lb ? -1 : 1
}

/** An object as its document shows it. */
export function documentOf(
  object: { kind: ConfigKind; name: string; layer: string | null; spec: Record<string, unknown> },
  desire: DesireContext,
): ConfigDocument {
  const kind = kinds[object.kind]
  const shown = kind.show?.(object.spec, object.name, object.layer, desire) ?? object.spec
  return {
    apiVersion: configApiVersion,
    kind: object.kind,
    metadata:
      object.layer === null ? { name: object.name } : { name: object.name, layer: object.layer },
    spec: canonical(configSpecs[object.kind], shown) as Record<string, unknown>,
  }
}

export async function readState(db: Db, ctx: ConfigContext): Promise<State> {
  const snapshot = await readSnapshot(db, ctx.enterpriseId)
  const refs = refsOf(snapshot)
  const live = configKinds
    .flatMap((kind) => kinds[kind].read(snapshot, refs, db, ctx))
    .sort(byIdentity)
  uniqueSecretNames(live)
  const desire: DesireContext = {
    enterpriseSlug: snapshot.enterprise.slug,
    mailDomain: ctx.mailDomain,
    builtinRoles: new Set(snapshot.roles.filter((r) => r.builtin && !r.teamId).map((r) => r.slug)),
    builtinTasks: new Set(snapshot.tasks.filter((t) => t.origin === 'builtin').map((t) => t.slug)),
  }
  const documents = live.map((object) => documentOf(object, desire))
  const base = `sha256:${createHash('sha256').update(JSON.stringify(documents)).digest('hex')}`
  return { snapshot, refs, live, documents, base, desire }
}

/** 403 api_token_scope naming the first read scope the kinds of the documents need and the caller lacks. */
export function requireReadScopes(caller: ConfigCaller, of: Iterable<ConfigKind>): void {
  const wanted = new Set(of)
  for (const kind of configKinds)
    if (wanted.has(kind))
      requireScope(caller, `${kinds[kind].resource}:read`, `Reading ${kind} documents`)
}

/** Which names each kind will have once the documents are applied. */
function worldOf(state: State, parsed: Parsed[], prune: boolean): World {
  const named = new Set(parsed.map((p) => p.kind))
  const names = (kind: ConfigKind, builtins: Iterable<string> = []) => {
    const set = new Set(builtins)
    if (!prune || !named.has(kind)) for (const l of state.live) if (l.kind === kind) set.add(l.name)
    for (const p of parsed) if (p.kind === kind) set.add(p.name)
    return set
  }
  return {
    teams: names('Team'),
    members: names('Member'),
    roles: names('Role', state.desire.builtinRoles),
    tasks: names('Task', state.desire.builtinTasks),
  }
}

/** A change as planned, with what the apply needs to make it. */
export interface Planned extends ConfigChange {
  live?: Live
  parsed?: Parsed
  /** The whole spec the document asks for. */
  spec?: Record<string, unknown>
  /** The top-level spec fields that change (a secret's new value counts as tokenFrom). */
  changed: Set<string>
}

/**
 * What the documents change. `secrets` are compared with what each object keeps, which needs the write
 * scope of its kind (telling a value kept from another is only for who may replace it).
 */
export async function planChanges(
  state: State,
  parsed: Parsed[],
  options: { prune: boolean; secrets: Record<string, string>; caller: ConfigCaller },
): Promise<Planned[]> {
  const world = worldOf(state, parsed, options.prune)
  const live = new Map(
    state.live.map((l, i) => [keyOf(l), { live: l, document: state.documents[i]! }]),
  )
  const planned: Planned[] = []
  for (const doc of parsed) {
    let spec: Record<string, unknown>
    try {
      spec = kinds[doc.kind].desire(doc, world, state.desire)
    } catch (err) {
      if (err instanceof DocumentError) throw invalidDocument(doc, err.field, err.message)
      throw err
    }
    const desired = documentOf({ ...doc, spec }, state.desire)
    const found = live.get(keyOf(doc))
    const identity = { kind: doc.kind, name: doc.name, layer: doc.layer, index: doc.index }
    if (!found) {
      planned.push({
        ...identity,
        action: 'create',
        fields: [],
        current: null,
        desired,
        parsed: doc,
        spec,
        changed: new Set(Object.keys(spec)),
      })
      continue
    }
    const { live: object, document } = found
    const fields = Object.keys(configSpecs[doc.kind].shape)
      .filter((key) => !sameJson(document.spec[key], desired.spec[key]))
      .map((key) => ({
        path: `spec.${key}`,
        old: object.spec[key] ?? null,
        new: spec[key] ?? null,
      }))
    const changed = new Set(fields.map((f) => f.path.slice('spec.'.length)))
    const tokenFrom = spec.tokenFrom as string | undefined
    const value = tokenFrom ? options.secrets[tokenFrom.slice('env:'.length)] : undefined
    if (tokenFrom && value !== undefined && !changed.has('tokenFrom')) {
      requireScope(
        options.caller,
        `${kinds[doc.kind].resource}:write`,
        `Comparing the secret of ${doc.kind} ${doc.name}`,
      )
      if (!(await object.secret?.(value))) {
        fields.push({ path: 'spec.tokenFrom (value)', old: '(kept)', new: `(from ${tokenFrom})` })
        changed.add('tokenFrom')
      }
    }
    planned.push({
      ...identity,
      action: fields.length > 0 ? 'update' : 'unchanged',
      fields,
      current: fields.length > 0 ? document : null,
      desired: fields.length > 0 ? desired : null,
      live: object,
      parsed: doc,
      spec,
      changed,
    })
  }
  if (options.prune) {
    const named = new Set(parsed.map((p) => p.kind))
    const wanted = new Set(parsed.map(keyOf))
    state.live.forEach((object, i) => {
      if (!named.has(object.kind) || singletonKinds.includes(object.kind)) return
      if (wanted.has(keyOf(object))) return
      planned.push({
        kind: object.kind,
        name: object.name,
        layer: object.layer,
        index: null,
        action: 'delete',
        fields: [],
        current: state.documents[i]!,
        desired: null,
        live: object,
        changed: new Set(),
      })
    })
  }
  return planned.sort(byIdentity)
}

/**
 * 403 api_token_scope naming the first change whose write scopes the caller lacks: nothing is applied.
 * A change needs its kind's, and those of what the API writes through another resource's routes (a
 * member's teams), so a token does through documents what it may do through the API and no more.
 */
export function requireWriteScopes(caller: ConfigCaller, planned: Planned[]): void {
  for (const change of planned) {
    if (change.action === 'unchanged') continue
    const kind = kinds[change.kind]
    const where = `${change.action} of ${change.kind} ${change.name}${change.layer ? ` on ${change.layer}` : ''}`
    requireScope(caller, `${kind.resource}:write`, `The ${where}`)
    if (change.action === 'delete' || !kind.otherWrites) continue
    for (const { field, resource } of kind.otherWrites(change.live?.spec, change.spec!))
      requireScope(caller, `${resource}:write`, `The ${where} (${field})`)
  }
}

/** A change as answered: without what only the apply needs. */
export function answerOf(change: Planned): ConfigChange {
  const { live: _live, parsed: _parsed, spec: _spec, changed: _changed, ...answer } = change
  return answer
}

/** An error of one change's writing, said as that object's: its kind and name lead the message. */
export function namedError(change: Planned, err: unknown): unknown {
  const at = {
    index: change.index ?? -1,
    kind: change.kind,
    name: change.name,
    layer: change.layer,
  }
  if (err instanceof DocumentError) return invalidDocument(at, err.field, err.message)
  if (!(err instanceof ApiError)) return err
  const where = `${change.kind} ${change.name}${change.layer ? ` on ${change.layer}` : ''}`
  return new ApiError(err.code, `${where}: ${err.message}`, {
    ...err.extra,
    document: { index: change.index, kind: change.kind, name: change.name, layer: change.layer },
    // As a schema fault names it (`spec.gates`), in place of the API body's own name (`url`); none
    // when no one field is known.
    field: fieldOf(change, err),
  })
}

/** The check of a definition that each issue code comes from: the field it asks to change. */
const issueFields: Record<string, string> = {
  gate_summary_tool_required: 'spec.tools',
  deterministic_with_tools: 'spec.tools',
  successor_when_unknown: 'spec.successors',
  successor_cap_invalid: 'spec.successors',
  successor_delay_invalid: 'spec.successors',
  unconditional_loop: 'spec.successors',
}

/** The API body's names of a task's fields that a document names otherwise. */
const taskBodyFields: Record<string, string> = { teamId: 'team' }

/**
 * The field of its document a refusal of the domain comes from (issue 48: "400 naming the document and
 * the field"), for the codes whose field is known. The others come from no field of the document: a
 * conflict with the state at the time (task_version_conflict, task_busy, team_last, team_has_tasks,
 * config_prune_refused), a record gone while the apply ran (team_not_found and the other not found:
 * desire() has checked every name against what will exist), or a fault that names its own field
 * already (config_document_invalid, config_secret_missing: DocumentError).
 */
function fieldOf(change: Planned, err: ApiError): string | undefined {
  const extra = err.extra ?? {}
  switch (err.code) {
    case 'url_not_allowed':
      // The egress check names the body's field: url, sites or startPage, a document's spec.* alike.
      return typeof extra.field === 'string' ? `spec.${extra.field}` : undefined
    case 'gate_required_for_tool':
      return 'spec.gates'
    case 'invalid_task_definition': {
      // The first error among the checks' issues, as its message says it first.
      const issues = (extra.issues ?? []) as { severity: string; code: string }[]
      const first = issues.find((i) => i.severity === 'error')
      return first && issueFields[first.code]
    }
    case 'skillMd_required':
      return 'spec.skillMd'
    case 'serialize_on_invalid':
      return 'spec.serializeOn'
    case 'llm_model_not_in_catalogue':
      return change.kind === 'Task' ? 'spec.spend' : undefined
    case 'task_definition_read_only': {
      const [first] = (extra.fields ?? []) as string[]
      return first && `spec.${taskBodyFields[first] ?? first}`
    }
    case 'invalid_name':
    case 'invalid_slug':
    case 'task_slug_taken':
    case 'team_slug_taken':
    case 'role_slug_taken':
    case 'role_builtin':
    case 'os_task_immutable':
    case 'tool_namespace_reserved':
    case 'tool_connection_shadows_enterprise':
      return 'metadata.name'
    case 'member_email_taken':
      // The address the document gives, else the one osd makes from the name.
      return change.parsed?.spec.email !== undefined ? 'spec.email' : 'metadata.name'
    case 'role_team_mismatch':
      return change.kind === 'Member' ? 'spec.roles' : 'spec.assigneeRole'
    case 'ceo_bind_only':
      // On the enterprise the connection itself is the chief executive's; elsewhere its mustGate list.
      return change.layer === null ? 'metadata.layer' : 'spec.mustGate'
    default:
      return undefined
  }
}

import { ApiError } from '../../../shared/errors.js'
import type {
  ConfigApplied,
  ConfigApplyInput,
  ConfigExport,
  ConfigKind,
  ConfigPlan,
  ConfigPlanInput,
} from '../../../shared/schemas/config.js'
import { lockConfig } from '../../db/locks.js'
import { transaction, type Db, type Sql } from '../../db/sql.js'
import { parseDocuments } from './documents.js'
import { kinds, setLead, successorOrder } from './kinds/index.js'
import type { ConfigContext, Writer } from './model.js'
import {
  answerOf,
  namedError,
  planChanges,
  readState,
  requireReadScopes,
  requireWriteScopes,
  type Planned,
} from './plan.js'
import { configKinds } from '../../../shared/values.js'

// GET /v1/config, POST /v1/config/plan and /apply (issue 48; DESIGN 15). An apply is one transaction
// that takes the enterprise's config lock first (docs/locks.md), reads the enterprise, compares the
// base, checks every document and every scope before it writes anything, then writes each change
// through the domain function of its resource: all of it, or (an error anywhere) none.

/** A read of one snapshot: every statement of a plan or an export sees the same enterprise. */
async function snapshot<T>(sql: Sql, fn: (tx: Db) => Promise<T>): Promise<T> {
  return transaction(sql, async (tx) => {
    await tx`set transaction isolation level repeatable read, read only`
    return fn(tx)
  })
}

/** The enterprise's documents, in kind then name order, and the base they are. */
export async function exportConfig(sql: Sql, ctx: ConfigContext): Promise<ConfigExport> {
  requireReadScopes(ctx.caller, configKinds)
  const state = await snapshot(sql, (tx) => readState(tx, ctx))
  return { base: state.base, documents: state.documents }
}

export async function planConfig(
  sql: Sql,
  ctx: ConfigContext,
  input: ConfigPlanInput,
): Promise<ConfigPlan> {
  const parsed = parseDocuments(input.documents)
  requireReadScopes(ctx.caller, kindsOf(parsed))
  return snapshot(sql, async (tx) => {
    const state = await readState(tx, ctx)
    const planned = await planChanges(state, parsed, {
      prune: input.prune ?? false,
      secrets: input.secrets ?? {},
      caller: ctx.caller,
    })
    return { base: state.base, changes: planned.map(answerOf) }
  })
}

/** The kinds a plan reads: those of the documents. */
function kindsOf(parsed: { kind: ConfigKind }[]): ConfigKind[] {
  return [...new Set(parsed.map((p) => p.kind))]
}

/** Thrown to roll a dry run back, carrying its answer out of the transaction. */
class DryRun {
  constructor(readonly answer: ConfigApplied) {}
}

export async function applyConfig(
  sql: Sql,
  ctx: ConfigContext,
  input: ConfigApplyInput,
): Promise<ConfigApplied> {
  const parsed = parseDocuments(input.documents)
  requireReadScopes(ctx.caller, kindsOf(parsed))
  try {
    return await transaction(sql, async (tx) => {
      // First in the transaction (docs/locks.md): one apply of an enterprise at a time, the second
      // reading what the first wrote.
      await lockConfig(tx, ctx.enterpriseId)
      const state = await readState(tx, ctx)
      if (input.base !== undefined && input.base !== state.base)
        throw new ApiError(
          'config_changed',
          'The enterprise changed since that plan (its base is not the one sent): plan again and review the changes.',
          { base: state.base },
        )
      const secrets = input.secrets ?? {}
      const planned = await planChanges(state, parsed, {
        prune: input.prune ?? false,
        secrets,
        caller: ctx.caller,
      })
      requireWriteScopes(ctx.caller, planned)
      const writes = planned.filter((c) => c.action !== 'unchanged')
      if (writes.length > 0) await write({ db: tx, ctx, refs: state.refs, secrets }, writes)
      const after =
        writes.length > 0 && !input.dryRun ? (await readState(tx, ctx)).base : state.base
      const answer = { base: after, changes: planned.map(answerOf), dryRun: input.dryRun ?? false }
      if (input.dryRun) throw new DryRun(answer)
      return answer
    })
  } catch (err) {
    if (err instanceof DryRun) return err.answer
    throw err
  }
}

/**
 * Writes the changes in an order where each finds what it names: what frees a name or a reference is
 * removed first (connections, keys, tasks, members), then each kind is made or changed after the kinds
 * it names (teams before roles before members; teams' leads once the members exist; tasks after the
 * tasks their successors name), and roles and teams are removed last, once no task or member is left on
 * them.
 */
async function write(w: Writer, changes: Planned[]): Promise<void> {
  const of = (kind: ConfigKind, ...actions: Planned['action'][]) =>
    changes.filter((c) => c.kind === kind && actions.includes(c.action))
  const each = async (list: Planned[], fn: (c: Planned) => Promise<void>) => {
    for (const change of list) {
      try {
        await fn(change)
      } catch (err) {
        throw namedError(change, err)
      }
    }
  }
  const remove = (kind: ConfigKind) =>
    each(of(kind, 'delete'), (c) => kinds[kind].remove!(w, c.live!))
  const put = (list: Planned[]) =>
    each(list, async (c) => {
      const kind = kinds[c.kind]
      if (c.action === 'create') await kind.create!(w, c.parsed!, c.spec!)
      else await kind.update!(w, c.live!, c.spec!, c.changed)
    })

  for (const kind of ['ToolConnection', 'ModelKey', 'Task', 'Member'] as const) await remove(kind)
  await put(of('Settings', 'update'))
  await put(of('Team', 'create', 'update'))
  await put(of('Role', 'create', 'update'))
  await put(of('Member', 'create', 'update'))
  await each(of('Team', 'create', 'update'), async (c) => {
    const lead = c.spec!.lead as string | null
    if (lead !== ((c.live?.spec.lead as string | null | undefined) ?? null))
      await setLead(w, c.name, lead)
  })
  const tools = of('ToolConnection', 'create', 'update')
  const onTask = (c: Planned) => c.layer?.startsWith('task/') ?? false
  // A connection on a task is made once its task exists; the others before the tasks, whose checks
  // read every connection's mustGate list.
  await put(tools.filter((c) => !onTask(c)))
  await put(successorOrder(of('Task', 'create', 'update').map((c) => ({ ...c, spec: c.spec! }))))
  await put(tools.filter(onTask))
  await put(of('ModelKey', 'create', 'update'))
  await put(of('ModelTiers', 'update'))
  await put(of('SpendLimits', 'update'))
  await put(of('Retention', 'update'))
  await remove('Role')
  await remove('Team')
}

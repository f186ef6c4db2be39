import type { Resource } from '../../../../shared/scopes.js'
import type { ConfigKind } from '../../../../shared/schemas/config.js'
import type { Db } from '../../../db/sql.js'
import type { ConfigContext, Live, Parsed, Refs, World, Writer } from '../model.js'
import type { Snapshot } from '../snapshot.js'

/**
 * One kind of document: how its objects are read, how a document of it is understood, and how each
 * change is written through the domain of its resource (so the rules are the API's own).
 */
export interface Kind {
  kind: ConfigKind
  /** The scope resource its changes need: `<resource>:read` to plan, `<resource>:write` to change. */
  resource: Resource
  /** Its objects as they are; `db` and `ctx` are for comparing the secrets they keep. */
  read(snapshot: Snapshot, refs: Refs, db: Db, ctx: ConfigContext): Live[]
  /** A spec as its document shows it, beyond canonical(): defaults that depend on the object go. */
  show?(
    spec: Record<string, unknown>,
    name: string,
    layer: string | null,
    ctx: DesireContext,
  ): Record<string, unknown>
  /**
   * The whole spec a document asks for: cleaned as osd would store it, the defaults the schema cannot
   * give filled, its references checked against what will exist (DocumentError otherwise).
   */
  desire(doc: Parsed, world: World, ctx: DesireContext): Record<string, unknown>
  /**
   * What a create or update writes through another resource's routes in the API, so that it needs that
   * resource's write scope too: each with the field it comes from (a member's teams: POST and DELETE
   * /v1/teams/{id}/members, teams:write). `from` is the spec as it is, undefined for a create.
   */
  otherWrites?(
    from: Record<string, unknown> | undefined,
    to: Record<string, unknown>,
  ): { field: string; resource: Resource }[]
  create?(w: Writer, doc: Parsed, spec: Record<string, unknown>): Promise<void>
  update?(w: Writer, live: Live, spec: Record<string, unknown>, fields: Set<string>): Promise<void>
  remove?(w: Writer, live: Live): Promise<void>
}

export interface DesireContext {
  /** The enterprise's slug (members' derived addresses). */
  enterpriseSlug: string
  mailDomain: string
  /** The service's own roles and tasks: in every enterprise, with no document. */
  builtinRoles: ReadonlySet<string>
  builtinTasks: ReadonlySet<string>
}

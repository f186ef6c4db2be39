import { randomBytes } from 'node:crypto'
import { ApiError } from '../../../shared/errors.js'
import { fixedTools } from '../../../shared/schemas/tasks.js'
import {
  toolLayers,
  type ToolConnection,
  type ToolConnectionCreate,
  type ToolConnectionPatch,
  type ToolConnectionQuery,
  type ToolLayer,
} from '../../../shared/schemas/tools.js'
import type { Sealer } from '../../crypto.js'
import type { Db } from '../../db/sql.js'
import { layerFilter, layerOwner } from '../tasks/index.js'

// Tool connections (spec: Endpoints Tools; Authentication 10): an MCP tool server or a browser-operated
// system, on a layer. A token, and a person who is not an owner, may connect tools on a team, member, role
// or task, never on the enterprise, and may not change a mustGate list: those are the chief executive's
// (403 ceo_bind_only). The chief executive is the session of an owner of the enterprise; the routes say
// whether the caller is (mayBindEnterprise), so these functions never read a request.

/** What the caller may do beyond a token: the chief executive binds on the enterprise and sets mustGate. */
export interface BindRight {
  mayBindEnterprise: boolean
}

const tokenRight: BindRight = { mayBindEnterprise: false }

interface ConnectionRow {
  id: string
  enterpriseId: string
  name: string
  kind: 'mcp' | 'browser'
  url: string | null
  tokenCiphertext: Buffer | null
  sites: string[] | null
  startPage: string | null
  layer: ToolLayer
  layerId: string | null
  mustGate: string[]
  description: string
  createdAt: Date
  updatedAt: Date
}

function toConnection(row: ConnectionRow): ToolConnection {
  return {
    id: row.id,
    name: row.name,
    kind: row.kind,
    url: row.url,
    hasToken: row.tokenCiphertext !== null,
    sites: row.sites,
    startPage: row.startPage,
    layer: row.layer,
    layerId: row.layerId,
    mustGate: row.mustGate,
    description: row.description,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  }
}

const ceoOnly = (what: string) =>
  new ApiError(
    'ceo_bind_only',
    `${what} is the chief executive's to change: a signed-in owner of the enterprise, not an API token or a member.`,
  )

/**
 * The layer id to store a connection under: the enterprise's (stored as null) only for the chief
 * executive (else 403 ceo_bind_only), any other layer's once it names one of the enterprise's own.
 */
async function checkLayer(
  db: Db,
  enterpriseId: string,
  layer: ToolLayer,
  layerId: string | undefined,
  right: BindRight,
): Promise<string | null> {
  if (layer === 'enterprise' && !right.mayBindEnterprise)
    throw ceoOnly('A tool connection on the enterprise')
  const owner = await layerOwner(db, enterpriseId, toolLayers, layer, layerId)
  return layer === 'enterprise' ? null : owner
}

function kindOf(input: { url?: string | null; sites?: string[] | null }): 'mcp' | 'browser' {
  if (input.url && input.sites?.length)
    throw new ApiError(
      'invalid_request',
      'url or sites: a connection is a tool server or a browser system, not both.',
    )
  if (input.url) return 'mcp'
  if (input.sites?.length) return 'browser'
  throw new ApiError(
    'invalid_request',
    "url or sites: give a tool server's url (and token), or a browser system's sites and startPage.",
  )
}

/**
 * Connects a tool. Only the chief executive connects on the enterprise or gives a mustGate list of its
 * own; without one, the version-control connection starts with its merge tool on it (spec: Other records).
 */
export async function createToolConnection(
  db: Db,
  sealer: Sealer,
  enterpriseId: string,
  input: ToolConnectionCreate,
  right: BindRight = tokenRight,
): Promise<ToolConnection> {
  if (input.mustGate !== undefined && !right.mayBindEnterprise) throw ceoOnly('A mustGate list')
  const layerId = await checkLayer(db, enterpriseId, input.layer, input.layerId, right)
  const kind = kindOf(input)
  const mustGate = input.mustGate
    ? [...new Set(input.mustGate)]
    : input.name === 'vcs'
      ? [fixedTools.merge]
      : []
  const [row] = await db<ConnectionRow[]>`
    insert into tool_connections (enterprise_id, name, kind, url, token_ciphertext, sites, start_page, layer, layer_id,
                                  must_gate, description)
    values (${enterpriseId}, ${input.name}, ${kind}, ${input.url ?? null},
            ${input.token ? sealer.seal(input.token) : null}, ${input.sites ? db.json(input.sites) : null},
            ${input.startPage ?? null}, ${input.layer}, ${layerId}, ${db.json(mustGate)}, ${input.description ?? ''})
    returning *`
  return toConnection(row!)
}

async function loadConnection(db: Db, enterpriseId: string, id: string): Promise<ConnectionRow> {
  const [row] = await db<
    ConnectionRow[]
  >`select * from tool_connections where enterprise_id = ${enterpriseId} and id = ${id}`
  if (!row)
    throw new ApiError('tool_connection_not_found', `No tool connection ${id} in this enterprise.`)
  return row
}

export async function listToolConnections(
  db: Db,
  enterpriseId: string,
  query: ToolConnectionQuery,
): Promise<ToolConnection[]> {
  const byLayer = await layerFilter(db, enterpriseId, toolLayers, query)
  const rows = await db<ConnectionRow[]>`
    select * from tool_connections where enterprise_id = ${enterpriseId}
      ${byLayer.where}
     order by created_at, id`
  return rows.map(toConnection)
}

/**
 * Changes a connection or moves it to another layer. One on the enterprise, a move there, and any
 * mustGate list are the chief executive's.
 */
export async function updateToolConnection(
  db: Db,
  sealer: Sealer,
  enterpriseId: string,
  id: string,
  patch: ToolConnectionPatch,
  right: BindRight = tokenRight,
): Promise<ToolConnection> {
  const row = await loadConnection(db, enterpriseId, id)
  if (row.layer === 'enterprise' && !right.mayBindEnterprise)
    throw ceoOnly('A tool connection on the enterprise')
  if (patch.mustGate !== undefined && !right.mayBindEnterprise) throw ceoOnly('A mustGate list')
  const layer = patch.layer ?? row.layer
  // A layerId left out keeps the current one on the same layer; another layer's id never names this one.
  const sameLayer = layer === row.layer
  const layerId =
    patch.layer || patch.layerId
      ? await checkLayer(
          db,
          enterpriseId,
          layer,
          patch.layerId ?? (sameLayer ? (row.layerId ?? undefined) : undefined),
          right,
        )
      : row.layerId
  const mustGate = patch.mustGate === undefined ? row.mustGate : [...new Set(patch.mustGate)]
  const url = patch.url === undefined ? row.url : patch.url
  const sites = patch.sites === undefined ? row.sites : patch.sites
  const kind = kindOf({ url, sites })
  const [updated] = await db<ConnectionRow[]>`
    update tool_connections
       set name = ${patch.name ?? row.name}, kind = ${kind}, url = ${url}, sites = ${sites ? db.json(sites) : null},
           start_page = ${patch.startPage === undefined ? row.startPage : patch.startPage},
           token_ciphertext = ${patch.token === undefined ? row.tokenCiphertext : patch.token && sealer.seal(patch.token)},
           layer = ${layer}, layer_id = ${layerId}, description = ${patch.description ?? row.description},
           must_gate = ${db.json(mustGate)}, updated_at = now()
     where id = ${id} returning *`
  return toConnection(updated!)
}

export async function deleteToolConnection(
  db: Db,
  enterpriseId: string,
  id: string,
  right: BindRight = tokenRight,
): Promise<void> {
  const row = await loadConnection(db, enterpriseId, id)
  if (row.layer === 'enterprise' && !right.mayBindEnterprise)
    throw ceoOnly('A tool connection on the enterprise')
  await db`delete from tool_connections where id = ${id}`
}

export async function listSignIns(db: Db, enterpriseId: string, id: string) {
  await loadConnection(db, enterpriseId, id)
  const rows = await db<{ memberId: string; site: string; savedAt: Date }[]>`
    select member_id, site, saved_at from browser_sign_ins where connection_id = ${id} order by member_id, site`
  return rows.map((r) => ({ memberId: r.memberId, site: r.site, savedAt: r.savedAt.toISOString() }))
}

/** Forgets one member's sign-in, on one site or on all of them (again: no change). */
export async function forgetSignIn(
  db: Db,
  enterpriseId: string,
  id: string,
  memberId: string,
  site?: string,
): Promise<void> {
  await loadConnection(db, enterpriseId, id)
  await db`
    delete from browser_sign_ins where connection_id = ${id} and member_id = ${memberId}
      ${site ? db`and site = ${site}` : db``}`
}

/** Starts a tool OAuth; it completes in the signed-in browser of the person who started it. */
export async function startToolOAuth(
  db: Db,
  enterpriseId: string,
  input: { connectionId: string; authorizeUrl: string; clientId: string; scope?: string },
  redirectUri: string,
): Promise<{ url: string; state: string }> {
  await loadConnection(db, enterpriseId, input.connectionId)
  const state = randomBytes(24).toString('base64url')
  await db`insert into tool_oauth_states (state, enterprise_id, connection_id) values (${state}, ${enterpriseId}, ${input.connectionId})`
  const url = new URL(input.authorizeUrl)
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: input.clientId,
    redirect_uri: redirectUri,
    state,
    ...(input.scope ? { scope: input.scope } : {}),
  }).toString()
  return { url: url.toString(), state }
}

/** A connection a run can use, with its token opened. */
export interface RunConnection {
  id: string
  name: string
  kind: 'mcp' | 'browser'
  url: string | null
  token: string | undefined
}

/**
 * Where a lookup of tool connections looks: a run's task, role, member and team, or a chat's member,
 * the roles that member holds and its team (no task). The enterprise's own always.
 */
export interface ConnectionScope {
  enterpriseId: string
  taskId: string | null
  /** Nearest first: a run's one role, or every role a chat's member holds. */
  roleIds: readonly string[]
  memberId: string | null
  teamId: string | null
}

/**
 * The nearest tool connections (DESIGN 6, 11): those of the task, the roles, the member and the team,
 * and the enterprise's own. Where two share a name, the narrowest layer wins (of two roles, the first
 * named). Runs and chats both look connections up here, so a chat reaches what the member's runs do.
 */
export async function nearestConnections(
  db: Db,
  sealer: Sealer,
  scope: ConnectionScope,
): Promise<RunConnection[]> {
  const roleIds = db.array([...scope.roleIds])
  const rows = await db<ConnectionRow[]>`
    select * from tool_connections
     where enterprise_id = ${scope.enterpriseId}
       and (layer = 'enterprise'
            or (layer = 'task' and layer_id = ${scope.taskId}::uuid)
            or (layer = 'role' and layer_id = any(${roleIds}::uuid[]))
            or (layer = 'member' and layer_id = ${scope.memberId}::uuid)
            or (layer = 'team' and layer_id = ${scope.teamId}::uuid))
     order by case layer when 'task' then 0 when 'role' then 1 when 'member' then 2 when 'team' then 3 else 4 end,
              array_position(${roleIds}::uuid[], layer_id)`
  const byName = new Map<string, RunConnection>()
  for (const row of rows) {
    if (byName.has(row.name)) continue
    byName.set(row.name, {
      id: row.id,
      name: row.name,
      kind: row.kind,
      url: row.url,
      token: row.tokenCiphertext ? sealer.open(row.tokenCiphertext) : undefined,
    })
  }
  return [...byName.values()]
}

/** The tool connections of a run: its task's, its role's, its member's, its team's, the enterprise's. */
export function connectionsForRun(
  db: Db,
  sealer: Sealer,
  run: { enterpriseId: string; taskId: string; teamId: string | null; memberId: string | null },
  roleId: string | undefined,
): Promise<RunConnection[]> {
  return nearestConnections(db, sealer, { ...run, roleIds: roleId ? [roleId] : [] })
}

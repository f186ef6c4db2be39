import { randomBytes, randomUUID } from 'node:crypto'
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
import { sealedColumns, type Sealer } from '../../crypto.js'
import { requireAllowedUrl, siteUrl, type EgressRule } from '../../egress.js'
import { transaction, type Db } from '../../db/sql.js'
import { hashSecret, matchesHash } from '../secrets.js'
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

/** osd's own tool namespace: its built-in tools are os.<tool>, and no connection may take it (DESIGN 15). */
export const builtinToolNamespace = 'os'

/**
 * Whether a connection's name is the built-in namespace written another way: in another case or width,
 * with whitespace, separators or invisible characters. The namespace rule (shared/schemas/tools.ts)
 * lets only a-z, 0-9, _ and - through, so of these only `o-s` and `o_s` reach here; the rest is for the
 * day that rule is loosened, and for rows older than it.
 */
export function reservedToolNamespace(name: string): boolean {
  const folded = name
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[\s\p{Pd}\p{Pc}\p{Cf}.]/gu, '')
  return folded === builtinToolNamespace
}

function checkName(name: string): void {
  if (reservedToolNamespace(name))
    throw new ApiError(
      'tool_namespace_reserved',
      `"${name}" is reserved: osd's own tools are called ${builtinToolNamespace}.<tool>, so no tool connection may be named ${builtinToolNamespace}. Choose another name.`,
    )
}

/**
 * A connection below the enterprise takes the place of an enterprise connection of its name in every
 * run it reaches (connectionsForRun: the narrowest layer wins), so only a caller who could change that
 * connection may put one there: the chief executive (spec: Authentication 10), as for the enterprise
 * connection itself. Two requests at once cannot get round it: only the chief executive makes an
 * enterprise connection, and may shadow one anyway.
 */
async function checkShadowing(
  db: Db,
  enterpriseId: string,
  name: string,
  layer: ToolLayer,
  right: BindRight,
): Promise<void> {
  if (layer === 'enterprise' || right.mayBindEnterprise) return
  const [taken] = await db<{ id: string }[]>`
    select id from tool_connections
     where enterprise_id = ${enterpriseId} and layer = 'enterprise' and name = ${name}
     limit 1`
  if (taken)
    throw new ApiError(
      'tool_connection_shadows_enterprise',
      `The enterprise has a tool connection named ${name}, which only the chief executive may change; a connection on a ${layer} named ${name} would take its place in that ${layer}'s runs. Choose another name, or ask the chief executive.`,
      { connectionId: taken.id },
    )
}

/**
 * The origin a credential stored beside an address is bound to: scheme, host and port, compared
 * normalised (HTTPS://Host:443 is https://host). An address without an origin of its own (a scheme
 * other than the web's) is bound to the whole of itself.
 */
function originOf(url: string | null): string | null {
  if (url === null) return null
  try {
    const parsed = new URL(url)
    return parsed.origin === 'null' ? parsed.href : parsed.origin
  } catch {
    return url
  }
}

/** A browser site as its sign-ins are bound to it: an address's origin, or a bare host (and port). */
function siteKey(site: string): string {
  const trimmed = site.trim()
  if (trimmed.includes('://')) return originOf(trimmed)!
  try {
    return `//${new URL(`https://${trimmed}`).host}`
  } catch {
    return trimmed.toLowerCase()
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

/**
 * The addresses a connection sends osd to obey the egress rule (DESIGN 15): a tool server's url, a
 * browser system's sites and start page, each checked as it is given (400 url_not_allowed) and again
 * when osd connects.
 */
async function checkAddresses(
  egress: EgressRule,
  input: { url?: string | null; sites?: string[] | null; startPage?: string | null },
): Promise<void> {
  if (input.url) await requireAllowedUrl('url', input.url, egress)
  for (const site of input.sites ?? []) await requireAllowedUrl('sites', siteUrl(site), egress)
  if (input.startPage) await requireAllowedUrl('startPage', siteUrl(input.startPage), egress)
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
  egress: EgressRule,
  enterpriseId: string,
  input: ToolConnectionCreate,
  right: BindRight = tokenRight,
): Promise<ToolConnection> {
  if (input.mustGate !== undefined && !right.mayBindEnterprise) throw ceoOnly('A mustGate list')
  checkName(input.name)
  const layerId = await checkLayer(db, enterpriseId, input.layer, input.layerId, right)
  const kind = kindOf(input)
  await checkShadowing(db, enterpriseId, input.name, input.layer, right)
  await checkAddresses(egress, input)
  const mustGate = input.mustGate
    ? [...new Set(input.mustGate)]
    : input.name === 'vcs'
      ? [fixedTools.merge]
      : []
  // The id is made here: the token is sealed for its row (crypto.ts).
  const id = randomUUID()
  const [row] = await db<ConnectionRow[]>`
    insert into tool_connections (id, enterprise_id, name, kind, url, token_ciphertext, sites, start_page, layer,
                                  layer_id, must_gate, description)
    values (${id}, ${enterpriseId}, ${input.name}, ${kind}, ${input.url ?? null},
            ${input.token ? sealer.seal(input.token, sealedColumns.toolToken, id) : null},
            ${input.sites ? db.json(input.sites) : null},
            ${input.startPage ?? null}, ${input.layer}, ${layerId}, ${db.json(mustGate)}, ${input.description ?? ''})
    returning *`
  return toConnection(row!)
}

async function loadConnection(
  db: Db,
  enterpriseId: string,
  id: string,
  lock = false,
): Promise<ConnectionRow> {
  const [row] = await db<ConnectionRow[]>`
    select * from tool_connections where enterprise_id = ${enterpriseId} and id = ${id}
    ${lock ? db`for update` : db``}`
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
 *
 * Credentials stay with the address they were given for (DESIGN 15): a new origin of the url drops the
 * stored token, unless the same change sends one, and the OAuth sign-ins under way; a site taken off a
 * browser connection loses its members' sign-ins. Otherwise a holder of tools:write, who may not read a
 * token, could send it anywhere by moving its connection.
 */
export async function updateToolConnection(
  db: Db,
  sealer: Sealer,
  egress: EgressRule,
  enterpriseId: string,
  id: string,
  patch: ToolConnectionPatch,
  right: BindRight = tokenRight,
): Promise<ToolConnection> {
  // Only what the change gives is checked: an address saved before the rule (or a stricter
  // OSD_EGRESS_ALLOW) stays as it is and is refused when osd connects. Checked before the row is
  // locked, since a name may take a while to resolve.
  await checkAddresses(egress, patch)
  // The row is locked while the change is decided (for update: an OAuth start, whose state row points
  // at it, waits too): a token is never kept for an address that another change set meanwhile.
  return transaction(db, (tx) => changeConnection(tx, sealer, enterpriseId, id, patch, right))
}

async function changeConnection(
  db: Db,
  sealer: Sealer,
  enterpriseId: string,
  id: string,
  patch: ToolConnectionPatch,
  right: BindRight,
): Promise<ToolConnection> {
  const row = await loadConnection(db, enterpriseId, id, true)
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
  const name = patch.name ?? row.name
  if (name !== row.name) checkName(name)
  // A move to another team (member, role, task) of the same layer takes the name in new runs too.
  if (name !== row.name || layer !== row.layer || layerId !== row.layerId)
    await checkShadowing(db, enterpriseId, name, layer, right)
  const mustGate = patch.mustGate === undefined ? row.mustGate : [...new Set(patch.mustGate)]
  const url = patch.url === undefined ? row.url : patch.url
  const sites = patch.sites === undefined ? row.sites : patch.sites
  const kind = kindOf({ url, sites })
  const moved = originOf(url) !== originOf(row.url)
  const token =
    patch.token !== undefined
      ? patch.token && sealer.seal(patch.token, sealedColumns.toolToken, id)
      : moved
        ? null
        : row.tokenCiphertext
  const [updated] = await db<ConnectionRow[]>`
    update tool_connections
       set name = ${name}, kind = ${kind}, url = ${url}, sites = ${sites ? db.json(sites) : null},
           start_page = ${patch.startPage === undefined ? row.startPage : patch.startPage},
           token_ciphertext = ${token}, layer = ${layer}, layer_id = ${layerId},
           description = ${patch.description ?? row.description},
           must_gate = ${db.json(mustGate)}, updated_at = now()
     where id = ${id} returning *`
  if (moved) await db`delete from tool_oauth_states where connection_id = ${id}`
  if (patch.sites !== undefined) {
    const kept = new Set((sites ?? []).map(siteKey))
    const signedIn = await db<{ site: string }[]>`
      select distinct site from browser_sign_ins where connection_id = ${id}`
    const gone = signedIn.map((s) => s.site).filter((site) => !kept.has(siteKey(site)))
    if (gone.length)
      await db`delete from browser_sign_ins where connection_id = ${id} and site = any(${gone})`
  }
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

/**
 * Whether a connection's stored token is `candidate`, compared in constant time: what an apply of
 * documents asks to tell an unchanged token from a new one. The token itself never leaves this module.
 */
export async function sameToolToken(
  db: Db,
  sealer: Sealer,
  enterpriseId: string,
  id: string,
  candidate: string,
): Promise<boolean> {
  const row = await loadConnection(db, enterpriseId, id)
  if (!row.tokenCiphertext) return false
  return matchesHash(
    candidate,
    hashSecret(sealer.open(row.tokenCiphertext, sealedColumns.toolToken, row.id)),
  )
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
    // A connection in osd's own namespace (made before the name was reserved) offers no tools: its
    // os.<tool> would be taken for a built-in.
    if (byName.has(row.name) || reservedToolNamespace(row.name)) continue
    byName.set(row.name, {
      id: row.id,
      name: row.name,
      kind: row.kind,
      url: row.url,
      token: row.tokenCiphertext
        ? sealer.open(row.tokenCiphertext, sealedColumns.toolToken, row.id)
        : undefined,
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

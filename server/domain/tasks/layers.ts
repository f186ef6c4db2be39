import { ApiError } from '../../../shared/errors.js'
import { isUuid } from '../../../shared/ids.js'
import type { toolLayers } from '../../../shared/values.js'
import { idFilter } from '../../db/paging.js'
import type { Db, Fragment } from '../../db/sql.js'
import {
  memberNotFound,
  requireMember,
  requireRole,
  requireTeam,
  roleNotFound,
  teamNotFound,
} from '../org/index.js'
import { loadTask, taskNotFound } from './tasks.js'

// Settings bound at a layer of the organisation: model keys (enterprise, team, member), spend caps
// (enterprise, team, task, member) and tool connections (all five). One rule names a layer's owner for
// all three: the enterprise layer is the caller's own enterprise; any other layer is one of its teams,
// members, roles or tasks, named by its id, and an id of nothing in this enterprise is that layer's 404.

/** Every layer a setting may sit on (the tool connections' list, the widest). */
export type Layer = (typeof toolLayers)[number]

type OrgLayer = Exclude<Layer, 'enterprise'>

/** How a layer below the enterprise finds its record, and what it answers when there is none. */
function recordOf(layer: OrgLayer): {
  find: (db: Db, enterpriseId: string, id: string) => Promise<unknown>
  notFound: (id: string) => ApiError
} {
  switch (layer) {
    case 'team':
      return { find: requireTeam, notFound: teamNotFound }
    case 'member':
      return { find: requireMember, notFound: memberNotFound }
    case 'role':
      return { find: requireRole, notFound: roleNotFound }
    case 'task':
      return { find: loadTask, notFound: taskNotFound }
  }
}

/**
 * The id of what owns a setting at `layer`, of the layers this kind of setting takes (`layers`): for
 * the enterprise layer the caller's enterprise, whose id the layerId may name or leave out; for any
 * other layer the layerId, once it names one of the enterprise's own. A layer not taken is 400
 * invalid_request listing those taken, a missing layerId 400, an id of nothing here the layer's 404
 * (enterprise_not_found, team_not_found, member_not_found, role_not_found, task_not_found).
 */
export async function layerOwner<L extends Layer>(
  db: Db,
  enterpriseId: string,
  layers: readonly L[],
  layer: L,
  layerId: string | undefined,
): Promise<string> {
  taken(layers, layer)
  const at: Layer = layer
  if (at === 'enterprise') {
    if (layerId !== undefined && layerId !== enterpriseId)
      throw new ApiError(
        'enterprise_not_found',
        `layerId: the enterprise layer is this enterprise (${enterpriseId}, or no layerId); not ${layerId}.`,
      )
    return enterpriseId
  }
  if (layerId === undefined)
    throw new ApiError('invalid_request', `layerId: the ${at} layer needs the ${at}'s id.`)
  const record = recordOf(at)
  if (!isUuid(layerId)) throw record.notFound(layerId)
  await record.find(db, enterpriseId, layerId)
  return layerId
}

/** 400 invalid_request, listing the layers taken, unless `layer` is one of them. */
function taken<L extends Layer>(layers: readonly L[], layer: L): void {
  if (!layers.includes(layer))
    throw new ApiError('invalid_request', `layer: one of ${layers.join(', ')}; got "${layer}".`)
}

/**
 * The filter of a list of settings by layer and layerId, each optional (GET /v1/llm/bindings, GET
 * /v1/tools/bindings). With both, the layerId is checked as layerOwner checks it. A model key or tool
 * connection on the enterprise is stored without a layer id, so the enterprise's own id finds those.
 * The fragment is answered in an object: a promise that answered it would run it as a query.
 */
export async function layerFilter<L extends Layer>(
  db: Db,
  enterpriseId: string,
  layers: readonly L[],
  query: { layer?: L; layerId?: string },
): Promise<{ where: Fragment }> {
  const { layer, layerId } = query
  if (layer === undefined) return { where: idFilter(db, 'layer_id', layerId) }
  taken(layers, layer)
  if (layerId === undefined) return { where: db`and layer = ${layer}` }
  const owner = await layerOwner(db, enterpriseId, layers, layer, layerId)
  const stored = layer === 'enterprise' ? null : owner
  return { where: db`and layer = ${layer} and layer_id is not distinct from ${stored}::uuid` }
}

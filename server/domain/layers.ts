import { ApiError } from '../../shared/errors.js'
import type { Db } from '../db/sql.js'
import { requireMember } from './members.js'
import { requireRole } from './roles.js'
import { loadTask } from './tasks.js'
import { requireTeam } from './teams.js'

// Settings bound at a layer of the organisation (model keys, spend caps, tool connections): the layer
// below the enterprise is named by its id, which must be one of this enterprise's (else its own 404).

export type OrgLayer = 'team' | 'member' | 'role' | 'task'

const find: Record<OrgLayer, (db: Db, enterpriseId: string, id: string) => Promise<unknown>> = {
  team: requireTeam,
  member: requireMember,
  role: requireRole,
  task: loadTask,
}

/** The layerId of a layer below the enterprise, once it names one of the enterprise's own. */
export async function requireLayerId(
  db: Db,
  enterpriseId: string,
  layer: OrgLayer,
  layerId: string | undefined,
): Promise<string> {
  if (!layerId)
    throw new ApiError('invalid_request', `layerId: the ${layer} layer needs the ${layer}'s id.`)
  await find[layer](db, enterpriseId, layerId)
  return layerId
}

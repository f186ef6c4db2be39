import type { ApiClient } from './client.js'
import { UsageError } from './errors.js'
import { memberId, roleId, taskId, teamId } from './resolve.js'

// Model keys, spend caps and tool connections each sit on a layer: the enterprise itself, or one team,
// member, role or task of it (spec: Endpoints Models, Spend, Tools). A layer's record is named the way
// every other argument is: an id, or a slug (a member: an email or a name).

export type Layer = 'enterprise' | 'team' | 'member' | 'role' | 'task'

const resolvers: Record<Exclude<Layer, 'enterprise'>, typeof teamId> = {
  team: teamId,
  member: memberId,
  role: roleId,
  task: taskId,
}

/** What names a record of each layer, for help texts. */
export const layerRefHelp =
  'the team, role or task (id or slug) or member (id, email or name) of --layer'

/**
 * The layerId of `ref` on `layer`: undefined for the enterprise, which takes none; a usage error when
 * a team, member, role or task layer is not given its record. `flag` names the option in messages.
 */
export async function layerIdOf(
  client: ApiClient,
  layer: Layer,
  ref: string | undefined,
  flag: string,
): Promise<string | undefined> {
  if (layer === 'enterprise') {
    if (ref !== undefined) throw new UsageError(`the enterprise layer takes no ${flag}`)
    return undefined
  }
  if (ref === undefined) throw new UsageError(`--layer ${layer} needs ${flag} naming the ${layer}`)
  return resolvers[layer](client, ref)
}

/**
 * `--team T` or `--member M` (at most one), else the enterprise: the layer of a model key or sign-in.
 */
export async function teamOrMember(
  client: ApiClient,
  opts: { team?: string; member?: string },
): Promise<{ layer: 'enterprise' | 'team' | 'member'; layerId?: string }> {
  if (opts.team !== undefined && opts.member !== undefined)
    throw new UsageError('give --team or --member, not both')
  if (opts.team !== undefined) return { layer: 'team', layerId: await teamId(client, opts.team) }
  if (opts.member !== undefined)
    return { layer: 'member', layerId: await memberId(client, opts.member) }
  return { layer: 'enterprise' }
}

/** How a layer reads in a sentence: "the enterprise", "team platform". */
export function layerText(layer: string, ref: string | null | undefined): string {
  return layer === 'enterprise' || !ref ? 'the enterprise' : `${layer} ${ref}`
}

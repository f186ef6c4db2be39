import type { LlmBinding } from '../../../shared/schemas/models.js'
import type { Member, Role, Team } from '../../../shared/schemas/organisation.js'
import type { RetentionSettings } from '../../../shared/schemas/retention.js'
import type { SpendView } from '../../../shared/schemas/spend.js'
import type { ToolConnection } from '../../../shared/schemas/tools.js'
import type { VersionDefinition } from '../../../shared/schemas/tasks.js'
import type { Db } from '../../db/sql.js'
import { getEnterprise, getSettings, type EnterpriseSettings } from '../enterprises/index.js'
import { getSpend, getTiers, listBindings } from '../models/index.js'
import { listMembers, listRoles, listTeams } from '../org/index.js'
import { listSchedules, listTaskDefinitions, type TaskRow } from '../tasks/index.js'
import { getRetention } from '../retention/index.js'
import { listToolConnections } from '../tools/index.js'
import type { Refs } from './model.js'
import { secretSources } from './secrets.js'

// Everything the documents describe, read once per plan or apply through each resource's own domain
// functions (a dozen statements however large the enterprise), and the names it is known by.

export interface Snapshot {
  enterprise: { id: string; slug: string }
  settings: EnterpriseSettings
  teams: Team[]
  roles: Role[]
  members: Member[]
  tasks: (TaskRow & { definition: VersionDefinition })[]
  schedules: Awaited<ReturnType<typeof listSchedules>>
  tools: ToolConnection[]
  keys: LlmBinding[]
  tiers: Awaited<ReturnType<typeof getTiers>>['tiers']
  spend: SpendView
  retention: RetentionSettings
  sources: Awaited<ReturnType<typeof secretSources>>
}

export async function readSnapshot(db: Db, enterpriseId: string): Promise<Snapshot> {
  // One statement after another: in a transaction they share its one connection anyway.
  const enterprise = await getEnterprise(db, enterpriseId)
  return {
    enterprise: { id: enterprise.id, slug: enterprise.slug },
    settings: await getSettings(db, enterpriseId),
    teams: await listTeams(db, enterpriseId),
    roles: await listRoles(db, enterpriseId),
    members: await listMembers(db, enterpriseId),
    tasks: await listTaskDefinitions(db, enterpriseId),
    schedules: await listSchedules(db, enterpriseId),
    tools: await listToolConnections(db, enterpriseId, {}),
    keys: await listBindings(db, enterpriseId, {}),
    tiers: (await getTiers(db, enterpriseId)).tiers,
    spend: await getSpend(db, enterpriseId),
    retention: await getRetention(db, enterpriseId),
    sources: await secretSources(db, enterpriseId),
  }
}

/** The names the snapshot's records are known by in documents. */
export function refsOf(snapshot: Snapshot): Refs {
  const teams = new Map(snapshot.teams.map((t) => [t.slug, t.id]))
  const teamSlug = new Map(snapshot.teams.map((t) => [t.id, t.slug]))
  const roles: Refs['roles'] = new Map()
  for (const role of snapshot.roles) {
    const team = role.teamId ? teamSlug.get(role.teamId) : undefined
    if (role.teamId && !team) continue
    roles.set(team ? `${team}/${role.slug}` : role.slug, {
      id: role.id,
      teamId: role.teamId,
      builtin: role.builtin,
    })
  }
  // Two members of one name cannot both have a document: the first keeps the name (kinds/members.ts
  // refuses to read such an enterprise).
  const members = new Map<string, string>()
  for (const member of snapshot.members)
    if (!members.has(member.name)) members.set(member.name, member.id)
  return {
    enterprise: snapshot.enterprise,
    teams,
    members,
    roles,
    tasks: new Map(
      snapshot.tasks.map((t) => [t.slug, { id: t.id, builtin: t.origin === 'builtin' }]),
    ),
  }
}

import type { ConfigKind } from '../../../../shared/values.js'
import type { Kind } from './kind.js'
import { membersKind } from './members.js'
import { modelKeysKind, modelTiersKind } from './models.js'
import { retentionKind } from './retention.js'
import { rolesKind } from './roles.js'
import { settingsKind } from './settings.js'
import { spendKind } from './spend.js'
import { tasksKind } from './tasks.js'
import { toolsKind } from './tools.js'

export type { DesireContext, Kind } from './kind.js'
export { setLead } from './teams.js'
export { successorOrder } from './tasks.js'
export { singletonName } from './settings.js'
import { teamsKind } from './teams.js'

/**
 * Every kind of document. A new kind is a module here, a name in shared/values.ts configKinds, a spec
 * in shared/schemas/config.ts, a read in snapshot.ts and a step in apply.ts's order.
 */
export const kinds: Record<ConfigKind, Kind> = {
  Settings: settingsKind,
  Team: teamsKind,
  Role: rolesKind,
  Member: membersKind,
  Task: tasksKind,
  ToolConnection: toolsKind,
  ModelKey: modelKeysKind,
  ModelTiers: modelTiersKind,
  SpendLimits: spendKind,
  Retention: retentionKind,
}

//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export { assignTaskToRole, unassignTaskFromRole } from './assignment.js'
export { copyTask } from './copy.js'
export { readTask, listTasks, listVersions, getVersion, getWorkflow } from './tasks.js'

// For the API (routes and http/) and other concepts of the domain.
export { publishVersion } from './tasks.js'
export { setTaskSchedule, clearTaskSchedule } from './scheduling.js'
export { deleteTask } from './deletion.js'

// For the API (routes and http/) and tests and benches.
export { taskProblems } from './checks.js'

// For the API (routes and http/), other concepts of the domain and tests and benches.
export { createTask } from './tasks.js'

// For the engine.
export { reaches, reachesNamespace } from './reach.js'
export { enabledSchedules, claimFires, recordFires, type DueSchedule } from './schedules.js'

// For the engine and other concepts of the domain.
export { rememberTool, proposeChangeTool } from './builtin.js'
export { mustGateTools } from './tasks.js'

// For other concepts of the domain.
export { type CheckContext } from './checks.js'
export { layerFilter } from './layers.js'
export { validCron, validTimeZone, listSchedules } from './schedules.js'
export {
  taskNotFound,
  loadTask,
  lockTasksOf,
  loadVersion,
  insertVersion,
  listTaskDefinitions,
  syncClones,
  type TaskRow,
  taskColumns,
} from './tasks.js'

// For other concepts of the domain and tests and benches.
export { builtinTasks } from './builtin.js'
export { checkDefinition } from './checks.js'
export { layerOwner } from './layers.js'
export { setSchedule } from './schedules.js'
export { checkContext } from './tasks.js'

// For tests and benches.
export { type Layer } from './layers.js'

// Runs: starting them, moving them from state to state, and their events (spec: Run; States and
// transitions; DESIGN 5). Every status change goes through transitionAll() (transition() for one run),
// which checks it, writes the runs, keeps the running counts, and appends the events, in the caller's
// transaction. Admission and dispatch are in admission.ts; what is read about runs in views.ts.
//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export {
  listExecutions,
  getBoard,
  getCounts,
  cancelExecution,
  closeExecution,
  reopenExecution,
  closeCompleted,
} from './executions.js'
export { retryRun, clearRun } from './people.js'
export { listSteps, forkRun } from './forks.js'
export { listPlans, getPlan } from './plans.js'
export { listRuns, getOsToolView, getBlockers, clearFailed } from './views.js'

// For the API (routes and http/): pause and resume (issue 50).
export { pauseTask, resumeTask, pauseEnterprise, resumeEnterprise } from './pausing.js'

// For the API (routes and http/) and other concepts of the domain.
export { toRun } from './rows.js'
export { type RunStarts } from './start.js'

// For the API (routes and http/) and tests and benches.
export { cancelRun } from './ends.js'
export { countBulkMatches, startBulkOperation, getBulkOperation, bulkItems } from './bulk.js'
export { StartBatcher } from './start.js'

// For the API (routes and http/) and the engine.
export { runChannel } from './rows.js'

// For the engine.
export {
  bulkBatch,
  bulkChannel,
  claimBulkOperations,
  holdsBulkOperation,
  listenBulkLocally,
  releaseBulkOperations,
  renewBulkOperations,
} from './bulk.js'
export { renewLeases, releaseLeases, holdsRun } from './admission.js'
export { eventsOfTypes, type NewEvent } from './events.js'
export {
  readJournal,
  startModelStep,
  journalHead,
  endModelStep,
  setStepCost,
  startToolStep,
  insertToolDone,
  answerToolStep,
  markExecuting,
  stored,
  type JournalEntry,
  type ToolRequest,
} from './journal.js'
export { writePlan } from './plans.js'
export { assigneeRoleId, enqueueRuns } from './start.js'
export { runContext, lockHeldRun, addRunCost, writeRunLog } from './work.js'
export { runGoesOn, waitPaused } from './pausing.js'

// For the engine and other concepts of the domain.
export { appendEvent, appendEvents } from './events.js'

// For the engine and tests and benches.
export { advance, resumeDueHolds, nextDueRun, takeOverLapsed, keepRunTrace } from './admission.js'
export { finishAll, finishRun } from './ends.js'
export { appendWhileHeld } from './events.js'

// For the engine, other concepts of the domain and tests and benches.
export { type RunRow } from './rows.js'
export { transition } from './transitions.js'

// For other concepts of the domain.
export { type EventRow, toEvent } from './events.js'
export { actorNames, toGate, type GateRow, gateColumns } from './gates.js'
export { decidedGates, tellRun, clip } from './history.js'
export { onRunOutcomes, type RunOutcome } from './outcomes.js'
export { runNotFound, type MemoryScope } from './rows.js'
export { onSetbacks, reportSetbacks, type Setback } from './setbacks.js'
export { lockLanes, tryLockLanes } from './start.js'
export { getRunDetail, getRunLog } from './views.js'
export { forksOf, toStep } from './forks.js'
export { getExecutionDetail, executionDetailOf, executionOfRuns } from './executions.js'
export { type StepRow } from './journal.js'

// For other concepts of the domain and tests and benches.
export { laneOf, startRunsIn, enqueueRun } from './start.js'
export { transitionAll } from './transitions.js'

// For the daemon and the operator commands.
export { runGauges } from './gauges.js'

// For tests and benches.
export { admitPending, dispatchQueued, maxTakeovers } from './admission.js'
export { loadRun } from './rows.js'
export { startRun } from './start.js'
export { outcomeMatches, whenMatches, issueKey } from './successors.js'

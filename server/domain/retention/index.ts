// Retention (issue 46; DESIGN 15): each enterprise's windows, the pass that moves what is past them
// out of the live tables (into the archive first, when kept), and reading archived runs, executions and chats back.
export { getRetention, listRetention, updateRetention } from './settings.js'
export {
  backgroundDuty,
  defaultBatchSize,
  planRetention,
  retentionPass,
  unauthenticatedWindow,
  type Moved,
  type PassOptions,
  RetentionPassError,
} from './pass.js'
export {
  archivedByPrefix,
  archivedChatDetail,
  archivedRun,
  archivedRunDetail,
  chatDetail,
  executionDetail,
  runDetail,
  runLog,
  runSteps,
} from './read.js'
export { archiveDirProblem, archiveFile, readMember } from './files.js'

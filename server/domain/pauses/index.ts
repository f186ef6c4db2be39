// Pauses of a task or of an enterprise (issue 50): the pauses table, read and written here only. What
// a pause does to runs is in runs/pausing.ts; to chats, in chats' claim of turns.
//
// Named exports (issue 43): what code outside the concept uses, by who uses it.

// For other concepts of the domain.
export {
  endPause,
  insertPause,
  pauseJson,
  pauseOf,
  pausedTasks,
  pausedWhere,
  pausesInForce,
  toRunPause,
} from './pauses.js'

//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export {
  listRecommendations,
  listTaskRecommendations,
  getRecommendation,
  decideRecommendation,
} from './recommendations.js'
export {
  writeTaskNote,
  tombstoneNote,
  rateNote,
  taskMemory,
  setValidUntil,
  askTaskMemory,
  recallHealth,
  listReview,
  listReviewHistory,
  resolveReview,
  dismissReview,
  startTraining,
} from './memory/index.js'

// For the API (routes and http/) and tests and benches.
export { listNotes, getNote } from './memory/index.js'

// For the API (routes and http/), the engine and tests and benches.
export { installLearning } from './improve.js'

// For the engine.
export { chooseImproveMaterial, improveBriefing, type ImproveMaterial } from './briefing.js'
export { improvedTaskId } from './recommendations.js'
export {
  activeNotesByIds,
  defaultRecallLimit,
  chooseTrainingMaterial,
  trainingBriefing,
  memoryScopeOf,
  rememberLesson,
  type TrainingMaterial,
} from './memory/index.js'

// For the engine and tests and benches.
export { proposeChange } from './recommendations.js'
export { recallNotes, recallChatNotes } from './memory/index.js'

// For the daemon and the operator commands.
export { noTrigramMessage } from './memory/index.js'

// For the daemon and the operator commands and tests and benches.
export { memorySupport } from './memory/index.js'

// For tests and benches.
export { writeNote, countImpact, searchTaskNotes } from './memory/index.js'

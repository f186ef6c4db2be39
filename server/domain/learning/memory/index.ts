// Memory (DESIGN 10): notes per task, team and enterprise; recall and ask; ratings and the review queue.
export {
  writeNote,
  writeTaskNote,
  listNotes,
  getNote,
  tombstoneNote,
  rateNote,
  taskMemory,
  taskGrants,
  setValidUntil,
  readValidUntil,
  type NoteInput,
  type NoteSort,
} from './notes.js'
export { countImpact, lowImpactLift, lowImpactRuns } from './impact.js'
export { memorySupport, noTrigramMessage, type MemorySupport } from './support.js'
export {
  recallNotes,
  recallChatNotes,
  searchTaskNotes,
  askTaskMemory,
  recallHealth,
  searchTerms,
  searchScore,
  defaultRecallLimit,
  maxRecallLimit,
} from './recall.js'
export { listReview, listReviewHistory, resolveReview, dismissReview } from './review.js'
export { noteNotFound } from './rows.js'
export {
  startTraining,
  chooseTrainingMaterial,
  trainingBriefing,
  memoryScopeOf,
  rememberLesson,
  trainingRunLimit,
  trainingNoteLimit,
  type TrainingMaterial,
  type TrainingScope,
} from './training.js'
export type { RecalledNote, MemoryNote, NoteImpact } from '../../../../shared/schemas/memory.js'

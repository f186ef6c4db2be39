//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export { listChats, countUnread, closeChat } from './chats.js'
export { decideToolCall } from './decisions.js'
export { followDeltas } from './deltas.js'
export { openChatEvents } from './events.js'
export { listGrants, deleteGrant } from './grants.js'
export { stopReply } from './stops.js'

// For the API (routes and http/) and tests and benches.
export { createChat, sendMessage } from './chats.js'

// For the API (routes and http/), the engine and tests and benches.
export { chatChannel } from './turns.js'

// For the engine.
export { checkProposal } from './decisions.js'
export { endStoppedTurn } from './stops.js'
export { DeltaPublisher } from './deltas.js'
export { isGranted } from './grants.js'
export {
  noticeMessage,
  markExecuting,
  answerToolCall,
  settleInterruptedCalls,
  chatMessages,
  turnPersonMessage,
  type StoredToolCall,
  isNotice,
} from './messages.js'
export {
  listenChatTurnsLocally,
  claimTurns,
  renewTurns,
  holdsTurn,
  turnLease,
  lockTurn,
  lockChatTurn,
  lockChatTurnLease,
  waitForPerson,
  releaseTurns,
  nextDueTurn,
  countTurnCall,
  recordRecall,
  type TurnRow,
  chatTurnChannel,
} from './turns.js'

// For the engine and other concepts of the domain.
export { type MessageRow } from './messages.js'
export { moveTurns } from './turns.js'

// For other concepts of the domain (runs/pausing.ts: an enterprise's resume).
export { wakeWaitingTurns } from './turns.js'

// For the engine and tests and benches.
export { insertMessage } from './messages.js'

// For other concepts of the domain.
export { toChat, chatNotFound, type ChatRow, type DetailQuery } from './chats.js'
export { toChatMessage } from './messages.js'
export { questionAnswered } from './turns.js'

// For other concepts of the domain and tests and benches.
export { getChatDetail } from './chats.js'

// For tests and benches.
export { deltaReaders, chatDeltaChannel } from './deltas.js'

// One long-poll (issue 43): a read held until something new comes on a watch's channel, for the run
// and the chat details alike.

// For other concepts of the domain (runs, chats, retention) and tests.
export {
  longPoll,
  longPollMs,
  longPollMaxSeconds,
  type LongPoll,
  type LongPollWait,
} from './long-poll.js'

import { ApiError } from '../../../shared/errors.js'
import type { ChatDeltaEvent, ChatMessage, ChatStatusEvent } from '../../../shared/schemas/chats.js'
import type { Db } from '../../db/sql.js'
import { replying } from './chats.js'
import { messageColumns, toChatMessage, type MessageRow } from './messages.js'

// GET /v1/chats/{id}/events (DESIGN 13; issue 26): a chat followed as it happens. Each stored message
// once as `message`, each later change of it as `message.updated` (a chat message's every change takes
// the next change_seq, in commit order: migration 0021), the text of the reply being made as `delta`,
// and the chat's own `chat` {status, replying}. Woken by the chat's NOTIFY (a message stored or
// changed, a turn moved) and by its deltas; a ping keeps proxies from closing a quiet stream.

export type ChatStreamEvent =
  | { event: 'message' | 'message.updated'; data: ChatMessage; id?: string }
  | { event: 'delta'; data: ChatDeltaEvent }
  | { event: 'chat'; data: ChatStatusEvent }
  | { comment: string }

export interface FollowChat {
  /** Waits for the chat's next change: ready resolves at it, after `ms`, or when the stream ends. */
  subscribe(chatId: string, ms: number): { ready: Promise<void>; cancel(): void }
  /** Follows the deltas of the chat's replies until the function it answers is called. */
  deltas(chatId: string, listener: (delta: ChatDeltaEvent) => void): () => void
  /** Ends the stream: the client went away, or the daemon stops. */
  signal: AbortSignal
  /** How long a quiet stream waits before a ping (15 s unless told). */
  pingMs?: number
  /**
   * The least time between two delta events (40 ms unless told): the first goes at once, what comes
   * within this time of it goes together in the next. Text at 25 frames a second reads as live, and a
   * frame per token of a fast model would cost a write each.
   */
  deltaGapMs?: number
}

/** The most changes one read sends; the next read takes the rest at once. */
const readLimit = 200

interface Position {
  status: 'open' | 'closed'
  replying: boolean
  /** The newest message the stream has sent (or the client had), by seq. */
  seq: string
  /** The newest change it has sent, by change_seq. */
  change: string
}

type Changed = MessageRow & { changeSeq: string }

/**
 * Where a stream starts: after the client's Last-Event-ID (a message of this chat: the messages after it,
 * and every message changed since it was stored, itself included: the client read it at some time since,
 * and may have missed what changed meanwhile), else now. chat_not_found for a chat the enterprise does not
 * have.
 */
async function startingPoint(
  db: Db,
  enterpriseId: string,
  chatId: string,
  lastEventId: string | undefined,
): Promise<Position> {
  const known = lastEventId && uuidPattern.test(lastEventId) ? lastEventId : null
  const [row] = await db<(Omit<Position, 'seq' | 'change'> & { seq: string; change: string })[]>`
    select c.status, ${replying(db)} as replying,
           coalesce(l.seq, (select max(seq) from chat_messages where chat_id = c.id), 0) as seq,
           coalesce(l.first_change, (select max(change_seq) from chat_messages where chat_id = c.id), 0) as change
      from chats c
      left join chat_messages l on l.chat_id = c.id and l.id = ${known}::uuid
     where c.enterprise_id = ${enterpriseId} and c.id = ${chatId}`
  if (!row) throw new ApiError('chat_not_found', `No chat ${chatId} in this enterprise.`)
  return {
    status: row.status,
    replying: row.replying,
    seq: String(row.seq),
    change: String(row.change),
  }
}

/** The chat's state and its messages changed after `change`, oldest change first. */
async function readChanges(
  db: Db,
  chatId: string,
  change: string,
): Promise<{ status: Position['status']; replying: boolean; changed: Changed[] }> {
  const rows = await db<(Changed & { chatStatus: Position['status']; chatReplying: boolean })[]>`
    select c.status as chat_status, ${replying(db)} as chat_replying, x.*
      from chats c
      left join lateral (
        select ${messageColumns(db)}
          from chat_messages m left join gates g on g.id = m.gate_id
         where m.chat_id = c.id and m.change_seq > ${change}::bigint
         order by m.change_seq limit ${readLimit}) x on true
     where c.id = ${chatId}`
  const [first] = rows
  return {
    status: first?.chatStatus ?? 'closed',
    replying: first?.chatReplying ?? false,
    changed: rows.filter((r) => r.id !== null),
  }
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * Opens the chat's stream: chat_not_found now, before anything is sent; then the events, until the
 * chat closes or `follow.signal` aborts. Deltas of a message already stored are not sent again.
 */
export async function openChatEvents(
  db: Db,
  enterpriseId: string,
  chatId: string,
  lastEventId: string | undefined,
  follow: FollowChat,
): Promise<AsyncGenerator<ChatStreamEvent>> {
  if (!uuidPattern.test(chatId))
    throw new ApiError('chat_not_found', `No chat ${chatId} in this enterprise.`)
  const position = await startingPoint(db, enterpriseId, chatId, lastEventId)
  return events(db, chatId, position, follow)
}

/** Deltas in order, the consecutive ones of one message joined into one. */
function joined(deltas: ChatDeltaEvent[]): ChatDeltaEvent[] {
  const out: ChatDeltaEvent[] = []
  for (const delta of deltas) {
    const last = out.at(-1)
    if (last?.messageId === delta.messageId) last.text += delta.text
    else out.push({ ...delta })
  }
  return out
}

async function* events(
  db: Db,
  chatId: string,
  at: Position,
  follow: FollowChat,
): AsyncGenerator<ChatStreamEvent> {
  const pingMs = follow.pingMs ?? 15_000
  const deltaGapMs = follow.deltaGapMs ?? 40
  const { signal } = follow
  let lastDelta = -Infinity
  let lastDeltaOf: string | undefined
  /** Ids of the messages this stream has sent as stored: their deltas are over. */
  const stored = new Set<string>()
  const deltas: ChatDeltaEvent[] = []
  // What the stream waits on: a delta, the chat's change, a delta's time, or the end. One waiter at a
  // time, woken by whichever comes first (no promise that lives as long as the stream is raced: each
  // race would leave a reaction on it).
  let poke: (() => void) | undefined
  const nudge = () => {
    const wake = poke
    poke = undefined
    wake?.()
  }
  const stopDeltas = follow.deltas(chatId, (delta) => {
    if (stored.has(delta.messageId)) return
    // The stream is woken by the first delta that waits; those after it go with it at its time.
    if (deltas.push(delta) === 1) nudge()
  })
  signal.addEventListener('abort', nudge, { once: true })
  try {
    // The chat as it is now: whether its member is replying.
    yield { event: 'chat', data: { status: at.status, replying: at.replying } }
    let lastSent = Date.now()
    for (;;) {
      // The wait starts before the read it guards, so a change landing in between is not missed.
      const watch = follow.subscribe(chatId, pingMs)
      const read = await readChanges(db, chatId, at.change)
      for (const row of read.changed) {
        const message = toChatMessage(row)
        const fresh = BigInt(row.seq) > BigInt(at.seq)
        // The message's deltas still waiting for their time go first: joined, a message's deltas are
        // its whole content.
        if (deltas.some((d) => d.messageId === row.id)) {
          const own = deltas.filter((d) => d.messageId === row.id)
          deltas.splice(0, deltas.length, ...deltas.filter((d) => d.messageId !== row.id))
          for (const delta of joined(own)) yield { event: 'delta', data: delta }
        }
        if (fresh) at.seq = String(row.seq)
        at.change = String(row.changeSeq)
        stored.add(row.id)
        yield fresh
          ? { event: 'message', data: message, id: message.id }
          : { event: 'message.updated', data: message }
        lastSent = Date.now()
      }
      if (read.status !== at.status || read.replying !== at.replying) {
        at.status = read.status
        at.replying = read.replying
        yield { event: 'chat', data: { status: at.status, replying: at.replying } }
        lastSent = Date.now()
      }
      if (at.status === 'closed' || signal.aborted) {
        watch.cancel()
        return
      }
      // More changes than one read takes: the next read at once.
      if (read.changed.length === readLimit) {
        watch.cancel()
        continue
      }
      // Deltas as they come, until the chat's next change, a ping's time, or the end.
      let woken = false
      void watch.ready.then(() => {
        woken = true
        nudge()
      })
      while (!woken && !signal.aborted) {
        // A reply's first delta goes at once; its next ones at most one each deltaGapMs.
        const wait = deltas[0]?.messageId === lastDeltaOf ? lastDelta + deltaGapMs - Date.now() : 0
        if (deltas.length === 0 || wait > 0) {
          let timer: NodeJS.Timeout | undefined
          await new Promise<void>((resolve) => {
            poke = resolve
            // Deltas are waiting for their time: woken at it (or sooner, by the chat's change).
            if (deltas.length > 0) timer = setTimeout(nudge, wait)
          })
          clearTimeout(timer)
        }
        if (deltas.length === 0 || woken) continue
        if (deltas[0]!.messageId === lastDeltaOf && Date.now() < lastDelta + deltaGapMs - 1)
          continue
        for (const delta of joined(deltas.splice(0))) {
          if (stored.has(delta.messageId)) continue
          yield { event: 'delta', data: delta }
          lastSent = lastDelta = Date.now()
          lastDeltaOf = delta.messageId
        }
      }
      watch.cancel()
      if (signal.aborted) return
      if (Date.now() - lastSent >= pingMs - 50) {
        yield { comment: 'ping' }
        lastSent = Date.now()
      }
    }
  } finally {
    signal.removeEventListener('abort', nudge)
    stopDeltas()
  }
}

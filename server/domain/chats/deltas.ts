import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ChatDeltaEvent } from '../../../shared/schemas/chats.js'
import { listenUntilStopped, unflushedCommit, type Sql } from '../../db/sql.js'

// The text of a reply as the model makes it (DESIGN 13; issue 26): told to the readers of the chat's
// event stream in this process at once, and to other processes' (`--role api` beside `--role engine`)
// by NOTIFY, when another process has a reader of the chat (chat_readers: each process says which
// chats it reads; an engine looks once a second while it replies). Deltas are never stored: the stored
// message is the record, and a reader that comes late gets the message when it is stored. A NOTIFY
// carries at most 8,000 bytes: longer text goes in pieces.

export const chatDeltaChannel = 'osd_chat_delta'

/** Tells this process's NOTIFYs apart: what it published it has already told its own readers. */
const origin = randomUUID().slice(0, 8)

type Listener = (delta: ChatDeltaEvent) => void

/** This process's readers of deltas, by chat. */
const listeners = new Map<string, Set<Listener>>()

function tell(chatId: string, delta: ChatDeltaEvent): void {
  for (const listener of listeners.get(chatId) ?? []) listener(delta)
}

/** Code points per NOTIFY: at most 6 bytes each once JSON-escaped, well under 8,000 with the rest. */
const pieceLength = 1_000

/** Text in pieces that each fit a NOTIFY, never splitting a character. */
function pieces(text: string): string[] {
  if (text.length <= pieceLength) return [text]
  const points = Array.from(text)
  const out: string[] = []
  for (let i = 0; i < points.length; i += pieceLength)
    out.push(points.slice(i, i + pieceLength).join(''))
  return out
}

/**
 * What one reply's text goes out through, for the message `messageId` it will be stored as. Readers in
 * this process get each piece at once; other processes' in NOTIFYs, one at a time, at most one each
 * `intervalMs` (the first at once): the rest of the text waits and goes together with what follows it.
 */
export class DeltaPublisher {
  private waiting = ''
  private sending: Promise<void> | undefined
  private sentAt = 0
  /** Whether another process reads the chat, and when that was last looked up. */
  private remote = false
  private lookedAt = -Infinity
  /** Pieces sent so far. */
  private sent = 0
  private flushing = false

  constructor(
    private readonly sql: Sql,
    private readonly chatId: string,
    readonly messageId: string,
    private readonly intervalMs = 50,
  ) {}

  /** The next piece of the reply's text. */
  readonly push = (text: string): void => {
    if (!text) return
    tell(this.chatId, { messageId: this.messageId, text })
    // Nobody reads the chat elsewhere, as looked up less than a second ago: nothing to send.
    if (!this.remote && Date.now() - this.lookedAt < lookEveryMs) return
    this.waiting += text
    this.pump()
  }

  /** Sends what waits, at once; resolves once every piece has gone out (before the message is stored). */
  async flush(): Promise<void> {
    this.flushing = true
    while (this.sending) await this.sending
  }

  private pump(): void {
    if (this.sending || !this.waiting) return
    this.sending = (async () => {
      const wait = this.sentAt + this.intervalMs - Date.now()
      if (wait > 0 && !this.flushing) await sleep(wait)
      if (Date.now() - this.lookedAt >= lookEveryMs) {
        // Known once answered: what comes meanwhile waits for the answer, rather than being dropped.
        this.remote = await readElsewhere(this.sql, this.chatId).catch(() => true)
        this.lookedAt = Date.now()
      }
      const text = this.waiting
      this.waiting = ''
      this.sentAt = Date.now()
      if (!this.remote) return
      // Numbered: PostgreSQL delivers identical payloads of one transaction once.
      const payloads = pieces(text).map((t) =>
        JSON.stringify({ o: origin, c: this.chatId, m: this.messageId, n: this.sent++, t }),
      )
      // Deltas are not kept: the commit need not wait for a flush, and a lost one loses nothing.
      await this.sql`
        select ${unflushedCommit(this.sql)}, pg_notify(${chatDeltaChannel}, p)
          from (select p from unnest(${this.sql.array(payloads)}::text[]) with ordinality as x(p, n)
                 order by n) pieces`.catch(() => undefined)
    })().finally(() => {
      this.sending = undefined
      this.pump()
    })
  }
}

/** How often a reply looks whether another process reads its chat. */
const lookEveryMs = 1_000

/** How long a process's word that it reads a chat holds without being said again. */
const readerTtlSeconds = 180

/** Whether a process other than this one has a reader of the chat's events. */
async function readElsewhere(sql: Sql, chatId: string): Promise<boolean> {
  const [row] = await sql<{ found: boolean }[]>`
    select exists (select 1 from chat_readers
                    where chat_id = ${chatId} and process <> ${origin}
                      and seen_at > now() - make_interval(secs => ${readerTtlSeconds})) as found`
  return row!.found
}

/**
 * Each chat's last write of this process's word that it reads it, while one is under way: the next
 * waits for it. Sent at once, a reader's delete and the next reader's insert (a client reconnecting)
 * went out on two connections of the pool, and the delete could land last: engines elsewhere then
 * sent that process no delta for the rest of the stream. An entry goes once its chain is idle.
 */
const saying = new Map<string, Promise<unknown>>()

/** This process reads the chat (or no longer does): what engines elsewhere look up. */
function sayReading(sql: Sql, chatId: string, reading: boolean): Promise<unknown> {
  const said = (saying.get(chatId) ?? Promise.resolve()).then(() =>
    (reading
      ? sql`insert into chat_readers (chat_id, process) values (${chatId}, ${origin})
            on conflict (chat_id, process) do update set seen_at = now()`
      : sql`delete from chat_readers where chat_id = ${chatId} and process = ${origin}`
    ).catch(() => undefined),
  )
  saying.set(chatId, said)
  void said.then(() => {
    if (saying.get(chatId) === said) saying.delete(chatId)
  })
  return said
}

/** One LISTEN per pool, held while this process has readers of deltas. */
const following = new WeakMap<
  Sql,
  {
    readers: number
    listening: Promise<{ unlisten(): Promise<void> }> | undefined
    /** Says again, while there are readers, which chats this process reads. */
    refresh: NodeJS.Timeout | undefined
  }
>()

/**
 * Follows the deltas of a chat's replies; answers the function that stops it. The pool's LISTEN starts
 * with its first reader and stops with its last.
 */
export function followDeltas(sql: Sql, chatId: string, listener: Listener): () => void {
  let set = listeners.get(chatId)
  if (!set) {
    listeners.set(chatId, (set = new Set()))
    void sayReading(sql, chatId, true)
  }
  set.add(listener)
  let state = following.get(sql)
  if (!state) following.set(sql, (state = { readers: 0, listening: undefined, refresh: undefined }))
  if (state.readers++ === 0) {
    state.refresh = setInterval(
      () =>
        void sql`update chat_readers set seen_at = now() where process = ${origin}`.catch(
          () => undefined,
        ),
      (readerTtlSeconds * 1000) / 3,
    ).unref()
    // Stopped for good with the last reader, even when the listening connection came back meanwhile:
    // postgres.js's own unlisten then stopped nothing, and the next readers were told each delta twice.
    state.listening = listenUntilStopped(sql, chatDeltaChannel, (payload) => {
      try {
        const { o, c, m, t } = JSON.parse(payload) as {
          o: string
          c: string
          m: string
          t: string
        }
        if (o !== origin) tell(c, { messageId: m, text: t })
      } catch {
        // not a payload of ours: nothing to tell
      }
    }).catch(() => ({ unlisten: async () => undefined }))
  }
  let stopped = false
  return () => {
    if (stopped) return
    stopped = true
    set.delete(listener)
    if (set.size === 0) {
      listeners.delete(chatId)
      void sayReading(sql, chatId, false)
    }
    if (--state.readers === 0) {
      clearInterval(state.refresh)
      const listening = state.listening
      state.listening = undefined
      void listening?.then((l) => l.unlisten()).catch(() => undefined)
    }
  }
}

/** How many readers of deltas this process has, and for how many chats (for tests and metrics). */
export function deltaReaders(): { chats: number; readers: number } {
  let readers = 0
  for (const set of listeners.values()) readers += set.size
  return { chats: listeners.size, readers }
}

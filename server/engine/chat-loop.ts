import { unflushedCommit, type Sql } from '../db/sql.js'
import { chatTurnChannel, listenChatTurnsLocally } from '../domain/chat-turns.js'
import { ChatReply, type ChatReplyOptions, type TurnRow } from './chat-reply.js'
import { followWakes } from './wakes.js'

// The engine's chat replies (DESIGN 11): a chat turn (one per person message) is claimed like a run,
// with a lease renewed while the reply is made and taken over once it lapses. The chat's messages are
// the turn's journal: a model call's answer is stored (text and tool calls) before anything acts on it,
// and a tool call is marked executing before it acts, so an engine that takes a turn over finishes the
// reply and never makes a tool call twice (one found executing is answered as of unknown outcome).
// The reply itself is chat-reply.ts.

export interface ChatLoopOptions extends ChatReplyOptions {
  sql: Sql
  leaseSeconds?: number
  sweepMs?: number
}

/** Turns one claim statement takes. */
const claimBatch = 8

export class ChatLoop {
  private readonly executing = new Map<string, AbortController>()
  private readonly working = new Set<Promise<void>>()
  private passing = false
  private again = false
  private stopped = false
  private timers: NodeJS.Timeout[] = []
  private wakes: { stop(): Promise<void> } | undefined

  constructor(private readonly options: ChatLoopOptions) {}

  private get leaseSeconds(): number {
    return this.options.leaseSeconds ?? 30
  }

  async start(): Promise<void> {
    const { sql, sweepMs = 5_000 } = this.options
    // A chat whose turn this process's own commit announced is heard once, not again at its NOTIFY
    // (a claim that finds nothing, for each reply).
    this.wakes = await followWakes({
      sql,
      channel: chatTurnChannel,
      listenLocally: listenChatTurnsLocally,
      heard: () => this.wake(),
      wake: () => this.wake(),
      sweepMs,
    })
    this.timers.push(setInterval(() => void this.renew(), (this.leaseSeconds * 1000) / 3))
    this.wake()
  }

  async stop(): Promise<void> {
    this.stopped = true
    for (const timer of this.timers) clearInterval(timer)
    await this.wakes?.stop()
    for (const controller of this.executing.values()) controller.abort()
    await Promise.allSettled([...this.working])
    // What this engine was replying to goes back in line for the next engine, at once.
    await this.options.sql`
      update chat_turns set status = 'pending', lease_owner = null, lease_expires_at = null
       where lease_owner = ${this.options.engineId} and status = 'running'`.catch(() => undefined)
  }

  /** A bound key lets the enterprise's blocked replies try again at once. */
  async unblock(enterpriseId: string): Promise<void> {
    await this.options.sql`
      update chat_turns set status = 'pending', updated_at = now()
       where enterprise_id = ${enterpriseId} and status = 'blocked'`
    this.wake()
  }

  wake(): void {
    if (this.stopped) return
    if (this.passing) {
      this.again = true
      return
    }
    this.passing = true
    setImmediate(() => void this.pass())
  }

  private async pass(): Promise<void> {
    try {
      do {
        this.again = false
        for (;;) {
          if (this.stopped) break
          // A batch at a time: a claim that finds fewer than it asked for was the last one needed.
          const turns = await this.claim()
          for (const turn of turns) this.execute(turn)
          if (turns.length < claimBatch) break
        }
      } while (this.again && !this.stopped)
    } catch (err) {
      this.options.log.warn({ err }, 'chat loop pass failed; trying again at the next wake')
    } finally {
      this.passing = false
    }
  }

  /**
   * Claims turns and reads what their replies work with (ChatContext), in one round trip. The claim
   * commits without waiting for its flush (as lease renewals do): a crash of the database that loses it
   * puts the turn back in line, and nothing the reply does before its next flushed commit acts outside.
   */
  private async claim(): Promise<TurnRow[]> {
    const { sql, engineId } = this.options
    return sql<TurnRow[]>`
      with claimed as (
        update chat_turns t
           set status = 'running', lease_owner = ${engineId},
               lease_expires_at = now() + make_interval(secs => ${this.leaseSeconds}), updated_at = now()
         where t.id in (select id from chat_turns
                         where status = 'pending' or (status = 'running' and lease_expires_at < now())
                         order by created_at limit ${claimBatch} for update skip locked)
        returning t.*)
      select t.*, ${unflushedCommit(sql)},
             (select json_build_object(
                       'id', c.id, 'enterpriseId', c.enterprise_id, 'memberId', c.member_id,
                       'purpose', c.purpose, 'status', c.status, 'memberName', m.name,
                       'persona', m.persona, 'enterpriseName', e.name,
                       'chatModelTier', e.chat_model_tier, 'chatMemoryDepth', e.chat_memory_depth,
                       'teamId', (select team_id from team_members tm where tm.member_id = c.member_id
                                   order by joined_at limit 1))
                from chats c
                left join members m on m.id = c.member_id
                left join enterprises e on e.id = c.enterprise_id
               where c.id = t.chat_id) as context
        from claimed t`
  }

  private async renew(): Promise<void> {
    if (this.executing.size === 0) return
    const { sql } = this.options
    await sql`
      with renewed as (
        update chat_turns set lease_expires_at = now() + make_interval(secs => ${this.leaseSeconds})
         where lease_owner = ${this.options.engineId} and status = 'running'
           and id = any(${sql.array([...this.executing.keys()])}::uuid[])
        returning 1)
      select ${unflushedCommit(sql)} from renewed limit 1`.catch((err: unknown) =>
      this.options.log.warn({ err }, 'could not renew chat leases'),
    )
  }

  private execute(turn: TurnRow): void {
    // This engine's own turn whose lease lapsed while it stalled: the reply in progress goes on.
    if (this.executing.has(turn.id)) return
    const controller = new AbortController()
    this.executing.set(turn.id, controller)
    const reply = new ChatReply(this.options, turn, controller.signal)
    const work = reply
      .go()
      .catch((err: unknown) =>
        this.options.log.error({ err, chatId: turn.chatId }, 'chat reply failed'),
      )
      .finally(async () => {
        await reply.close()
        this.executing.delete(turn.id)
        this.working.delete(work)
      })
    this.working.add(work)
  }
}

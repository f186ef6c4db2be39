import { defaultLeaseSeconds } from '../../config.js'
import type { Sql } from '../../db/sql.js'
import {
  chatTurnChannel,
  claimTurns,
  listenChatTurnsLocally,
  moveTurns,
  nextDueTurn,
  releaseTurns,
  renewTurns,
  turnLease,
  type TurnRow,
} from '../../domain/chats/index.js'
import { ChatReply, type ChatReplyOptions } from './reply.js'
import { LeaseLoop, type Leased, type WorkKind } from '../lease-loop.js'
import { span } from '../../traces/index.js'

// The engine's chat replies (DESIGN 11), as a kind of the lease loop: a chat turn (one per person
// message) is claimed like a run, with a lease renewed while the reply is made and taken over once it
// lapses; the reply itself is reply.ts.

export interface ChatLoopOptions extends ChatReplyOptions {
  sql: Sql
  leaseSeconds?: number
  sweepMs?: number
  /** How many replies this engine makes at once (OSD_ENGINE_CONCURRENCY). */
  capacity?: number
}

/** Turns one claim statement takes at most (fewer when fewer slots are free). */
const claimBatch = 8

interface TurnWork extends Leased {
  turn: TurnRow
}

export class ChatLoop extends LeaseLoop<TurnWork> {
  constructor(private readonly chatOptions: ChatLoopOptions) {
    const { sql, engineId } = chatOptions
    const leaseSeconds = chatOptions.leaseSeconds ?? defaultLeaseSeconds
    // The replies this engine is making, by turn id: a stop the person asked for (domain/chats/
    // stops.ts) reaches the reply here, heard at the wake of its chat (or, should that NOTIFY be lost,
    // at the next lease renewal), so that no piece of the reply's text costs a read of the database.
    const replies = new Map<string, ChatReply>()
    const stop = (id: string) => replies.get(id)?.stop()
    const kind: WorkKind<TurnWork> = {
      name: 'chat turn',
      logKey: 'turnId',
      channel: chatTurnChannel,
      // A chat whose turn this process's own commit announced is heard once, not again at its NOTIFY.
      listenLocally: listenChatTurnsLocally,
      async claim(room) {
        // A batch at a time, within the free slots: a claim that finds fewer than it asked for was
        // the last one needed.
        const want = Math.min(claimBatch, room)
        if (want === 0) return { claimed: [], more: false }
        const turns = await claimTurns(sql, engineId, leaseSeconds, want)
        return {
          claimed: turns.map((turn) => ({ id: turn.id, wakeKey: turn.chatId, turn })),
          more: turns.length === want,
        }
      },
      nextDue: () => nextDueTurn(sql),
      // A reply, a trace of its own (issue 49): a chat keeps no trace context between turns.
      execute: ({ turn }, signal) =>
        span(
          'chat reply',
          {
            'osd.chat.id': turn.chatId,
            'osd.chat.turn.id': turn.id,
            'osd.enterprise.id': turn.context?.enterpriseId,
          },
          async ({ trace }) => {
            const reply = new ChatReply(chatOptions, turn, signal, trace)
            replies.set(turn.id, reply)
            try {
              await reply.go()
            } finally {
              if (replies.get(turn.id) === reply) replies.delete(turn.id)
              await reply.close()
            }
          },
          { parent: null },
        ),
      async renew(ids) {
        const { held, stopping } = await renewTurns(sql, engineId, ids, leaseSeconds)
        for (const id of stopping) stop(id)
        return held
      },
      async stillHeld(id) {
        const { held, stopping } = await turnLease(sql, engineId, id)
        if (stopping) stop(id)
        return held
      },
      release: (ids) => releaseTurns(sql, engineId, ids),
    }
    super(kind, {
      sql,
      log: chatOptions.log,
      sweepMs: chatOptions.sweepMs,
      leaseSeconds,
      capacity: chatOptions.capacity,
    })
  }

  /** A bound key lets the enterprise's replies blocked for want of one try again at once. */
  async unblock(enterpriseId: string): Promise<void> {
    await moveTurns(this.chatOptions.sql, 'pending', { enterpriseId, from: ['blocked'] })
    this.wake()
  }
}

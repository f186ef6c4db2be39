import type { ModelTier } from '../../../shared/schemas/models.js'
import {
  notifyAfterCommit,
  onCommit,
  transaction,
  unflushedCommit,
  type Db,
  type Fragment,
} from '../../db/sql.js'
import { pausedWhere } from '../pauses/index.js'

// Chat turns (DESIGN 11): one per person message, claimed by an engine like a run, with a lease; the
// member's reply is made while its turn runs. This module is the only code that writes chat_turns, and
// every status change goes through moveTurns, which checks it. gates/ moves a chat's reply on when its
// question is answered (questionAnswered).

export const turnStatuses = [
  'pending',
  'running',
  'waiting',
  'blocked',
  'paused_spend',
  'done',
] as const
export type TurnStatus = (typeof turnStatuses)[number]

// Which status may follow which. pending: to be claimed; running: an engine makes the reply (a lapsed
// lease is claimed again); waiting: a tool call or question waits for the person; blocked: no model key
// (until one is bound) or a provider that did not answer (until not_before); paused_spend: a spend cap
// (until raised); done: replied, stopped, or the chat closed.
const next: Record<TurnStatus, readonly TurnStatus[]> = {
  pending: ['running', 'done'],
  running: ['running', 'done', 'waiting', 'blocked', 'paused_spend', 'pending'],
  waiting: ['pending', 'done'],
  blocked: ['running', 'pending', 'done'],
  paused_spend: ['pending', 'done'],
  done: [],
}

export interface TurnRow {
  /** A spend reservation of a model call in flight is held for the turn (a crash left it, if claimed). */
  reserved: boolean
  id: string
  enterpriseId: string
  chatId: string
  status: TurnStatus
  caller: string | null
  modelCalls: number
  /** How many times the turn was held (blocked) so far: its back-off grows with it. */
  holds: number
  recall: 'succeeded' | 'failed' | null
  /** The person asked to stop the reply (POST /v1/chats/{id}/reply/stop): it ends at once. */
  stopRequestedAt: Date | null
  /** What the reply works with, read by the claim itself (null: the chat is gone). */
  context: ChatContext | null
}

/** The chat, its member, the enterprise, the member's first team and roles, as the claim reads them. */
export interface ChatContext {
  id: string
  enterpriseId: string
  memberId: string
  purpose: string | null
  status: string
  memberName: string | null
  persona: string | null
  enterpriseName: string | null
  chatModelTier: ModelTier | null
  chatMemoryDepth: string | null
  teamId: string | null
  /**
   * The roles the member holds, team roles before enterprise-wide ones: a chat looks its tool
   * connections up on them as a run does on its task's role (DESIGN 11).
   */
  roleIds: string[]
}

// --- what wakes whom --------------------------------------------------------------------------------

/** NOTIFY channel of chat messages (the payload is the chat id): wakes long-polling readers. */
export const chatChannel = 'osd_chat'

/** NOTIFY channel of chat turns to claim (the payload is the chat id): wakes the engines' chat loops. */
export const chatTurnChannel = 'osd_chat_turn'

/** Chat loops of this process, told at the commit itself, before the NOTIFY comes back. */
const local = new Set<(chatId: string) => void>()

export function listenChatTurnsLocally(wake: (chatId: string) => void): () => void {
  local.add(wake)
  return () => local.delete(wake)
}

/** Tells readers of the chat that it changed (a message, whether its member replies), once `db` commits. */
export function chatChanged(db: Db, chatId: string): void {
  notifyAfterCommit(db, chatChannel, [chatId])
}

/** Tells the engines that a turn of the chat may be claimed (or has moved), once `db` commits. */
export function wakeChatTurns(db: Db, chatId: string): void {
  notifyAfterCommit(db, chatTurnChannel, [chatId])
  if (local.size > 0)
    onCommit(db, () => {
      for (const wake of local) wake(chatId)
    })
}

/**
 * Tells the engines that the enterprise's waiting turns may be claimed now (its pause ended), once `db`
 * commits: one wake per chat with a turn to claim.
 */
export async function wakeWaitingTurns(db: Db, enterpriseId: string): Promise<void> {
  const chats = await db<{ chatId: string }[]>`
    select distinct chat_id from chat_turns
     where enterprise_id = ${enterpriseId} and status in ('pending', 'running', 'blocked')`
  for (const { chatId } of chats) wakeChatTurns(db, chatId)
}

// --- status changes ---------------------------------------------------------------------------------

/** Which turns a move is for: one turn, a chat's, or an enterprise's; and from which statuses. */
export interface TurnSelection {
  ids?: readonly string[]
  chatId?: string
  enterpriseId?: string
  from: readonly TurnStatus[]
  /** Only while this engine holds the turn's lease. */
  owner?: string
}

export interface TurnFields {
  /** blocked: when it is tried again (domain/models/holds.ts), or at once when a key is bound. */
  notBefore?: Date
  /** The model call just settled, counted in the same statement: its cost in micro-dollars. */
  countCall?: number
}

/**
 * Moves the selected turns to `to`: checks each move, clears the lease of a turn that stops running,
 * and tells the chat's readers (whether its member replies) and, for pending, the engines. In the
 * caller's transaction; answers the chats of the turns moved.
 */
export async function moveTurns(
  db: Db,
  to: Exclude<TurnStatus, 'running'>,
  which: TurnSelection,
  fields: TurnFields = {},
): Promise<string[]> {
  for (const from of which.from)
    if (!next[from].includes(to)) throw new Error(`A ${from} chat turn cannot become ${to}.`)
  if (which.ids === undefined && which.chatId === undefined && which.enterpriseId === undefined)
    throw new Error('moveTurns: say which turns')
  const moved = await db<{ chatId: string }[]>`
    update chat_turns
       set status = ${to}, lease_owner = null, lease_expires_at = null,
           not_before = ${to === 'blocked' ? (fields.notBefore ?? null) : null},
           holds = ${to === 'blocked' ? db`holds + 1` : db`holds`}, updated_at = now()
           ${
             fields.countCall !== undefined
               ? db`, model_calls = model_calls + 1, cost_usd_micros = cost_usd_micros + ${fields.countCall}`
               : db``
           }
     where status = any(${db.array([...which.from])}::text[])
       ${which.ids !== undefined ? db`and id = any(${db.array([...which.ids])}::uuid[])` : db``}
       ${which.chatId !== undefined ? db`and chat_id = ${which.chatId}` : db``}
       ${which.enterpriseId !== undefined ? db`and enterprise_id = ${which.enterpriseId}` : db``}
       ${which.owner !== undefined ? db`and lease_owner = ${which.owner}` : db``}
    returning chat_id`
  const chats = [...new Set(moved.map((m) => m.chatId))]
  for (const chatId of chats) {
    chatChanged(db, chatId)
    if (to === 'pending' || to === 'done') wakeChatTurns(db, chatId)
  }
  return chats
}

/**
 * The statement of a new turn for the message `sendMessage` stores, as a fragment of its one statement:
 * inserted from the rows of `chat` (a CTE with id) that may take one.
 */
export function insertTurn(db: Db, enterpriseId: string, caller: string, chat: Fragment): Fragment {
  return db`
    insert into chat_turns (enterprise_id, chat_id, caller)
    select ${enterpriseId}, c.id, ${caller} from ${chat} c where c.status = 'open' and not c.replying
    returning id`
}

// --- leases -----------------------------------------------------------------------------------------

/**
 * Claims turns (pending, a lapsed lease, a blocked one now due) and reads what their replies work with
 * (ChatContext), in one round trip. The claim commits without waiting for its flush (as lease renewals
 * do): a crash of the database that loses it puts the turn back in line, and nothing the reply does
 * before its next flushed commit acts outside.
 */
export async function claimTurns(
  db: Db,
  engineId: string,
  leaseSeconds: number,
  limit: number,
): Promise<TurnRow[]> {
  return db<TurnRow[]>`
    with claimed as (
      update chat_turns t
         set status = 'running', lease_owner = ${engineId}, not_before = null,
             lease_expires_at = now() + make_interval(secs => ${leaseSeconds}), updated_at = now()
       where t.id in (select id from chat_turns c
                       where (status = 'pending' or (status = 'running' and lease_expires_at < now())
                              or (status = 'blocked' and not_before <= now()))
                         -- An enterprise's pause holds its replies until the resume (issue 50).
                         and not ${pausedWhere(db, db`c.enterprise_id`, db`null::uuid`)}
                       order by created_at limit ${limit} for update skip locked)
      returning t.*)
    select t.*, ${unflushedCommit(db)},
           exists (select 1 from spend_reservations r where r.turn_id = t.id) as reserved,
           (select json_build_object(
                     'id', c.id, 'enterpriseId', c.enterprise_id, 'memberId', c.member_id,
                     'purpose', c.purpose, 'status', c.status, 'memberName', m.name,
                     'persona', m.persona, 'enterpriseName', e.name,
                     'chatModelTier', e.chat_model_tier, 'chatMemoryDepth', e.chat_memory_depth,
                     'teamId', (select team_id from team_members tm where tm.member_id = c.member_id
                                 order by joined_at limit 1),
                     'roleIds', (select coalesce(json_agg(rm.role_id order by r.team_id is null,
                                                          rm.granted_at, rm.role_id), '[]'::json)
                                   from role_members rm join roles r on r.id = rm.role_id
                                  where rm.enterprise_id = c.enterprise_id
                                    and rm.member_id = c.member_id))
              from chats c
              left join members m on m.id = c.member_id
              left join enterprises e on e.id = c.enterprise_id
             where c.id = t.chat_id) as context
      from claimed t`
}

/**
 * Extends this engine's leases of these turns; answers the ids it still holds, and those of them whose
 * reply the person asked to stop (the engine's safety net should the stop's NOTIFY be lost).
 */
export async function renewTurns(
  db: Db,
  engineId: string,
  ids: string[],
  leaseSeconds: number,
): Promise<{ held: Set<string>; stopping: Set<string> }> {
  // Without waiting for the flush, as the claim: a lost renewal only lets the lease lapse sooner.
  // Locked in id order first, as runs' leases are (admission.ts renewLeases).
  const rows = await db<{ id: string; stopping: boolean }[]>`
    with mine as (
      select id from chat_turns
       where lease_owner = ${engineId} and status = 'running' and id = any(${db.array(ids)}::uuid[])
       order by id
       for update)
    update chat_turns t set lease_expires_at = now() + make_interval(secs => ${leaseSeconds})
      from mine where t.id = mine.id
    returning t.id, t.stop_requested_at is not null as stopping, ${unflushedCommit(db)}`
  return {
    held: new Set(rows.map((r) => r.id)),
    stopping: new Set(rows.filter((r) => r.stopping).map((r) => r.id)),
  }
}

/** Whether the turn is still running under this engine's lease (its chat may have closed). */
export async function holdsTurn(db: Db, engineId: string, id: string): Promise<boolean> {
  return (await turnLease(db, engineId, id)).held
}

/**
 * Whether the turn is still running under this engine's lease, and whether the person asked to stop
 * its reply: what an engine reads when the turn's chat is woken (one read per wake, none per piece of
 * the reply's text).
 */
export async function turnLease(
  db: Db,
  engineId: string,
  id: string,
): Promise<{ held: boolean; stopping: boolean }> {
  const [row] = await db<
    { status: string; leaseOwner: string | null; stopRequestedAt: Date | null }[]
  >`select status, lease_owner, stop_requested_at from chat_turns where id = ${id}`
  const held = row?.status === 'running' && row.leaseOwner === engineId
  return { held, stopping: held && row.stopRequestedAt !== null }
}

/** Whether a turn locked (or read) is this engine's to move, and whether its reply is to stop. */
export interface TurnLease {
  /** Still running under this engine's lease (not taken over, not closed). */
  held: boolean
  /** The person asked to stop its reply (stops.ts): it ends stopped rather than going on. */
  stopping: boolean
}

/** Locks the turn in `tx`; whether it is still this engine's to move, and whether it is to stop. */
export async function lockTurnLease(tx: Db, engineId: string, id: string): Promise<TurnLease> {
  const [row] = await tx<
    { status: string; leaseOwner: string | null; stopRequestedAt: Date | null }[]
  >`select status, lease_owner, stop_requested_at from chat_turns where id = ${id} for update`
  const held = row?.status === 'running' && row.leaseOwner === engineId
  return { held, stopping: held && row.stopRequestedAt !== null }
}

/** Locks the turn in `tx`; whether it is still this engine's to move (not taken over, not closed). */
export async function lockTurn(tx: Db, engineId: string, id: string): Promise<boolean> {
  return (await lockTurnLease(tx, engineId, id)).held
}

/**
 * Locks the turn's chat, then the turn (docs/locks.md: a chat before its turn), in `tx`; whether the
 * turn is still this engine's to move, and whether its reply is to stop. Every change of a reply that
 * touches the chat goes through it.
 */
export async function lockChatTurnLease(
  tx: Db,
  chatId: string,
  engineId: string,
  turnId: string,
): Promise<TurnLease> {
  const [, lease] = await Promise.all([
    tx`select 1 from chats where id = ${chatId} for no key update`,
    lockTurnLease(tx, engineId, turnId),
  ])
  return lease
}

/** lockChatTurnLease, answering only whether the turn is still this engine's to move. */
export async function lockChatTurn(
  tx: Db,
  chatId: string,
  engineId: string,
  turnId: string,
): Promise<boolean> {
  return (await lockChatTurnLease(tx, chatId, engineId, turnId)).held
}

/**
 * The turn waits for the person's decision of its tool calls, unless it came meanwhile (a call allowed
 * already, or none waiting): the chat's lock orders this against the decision, which takes it first.
 * Answers what the reply does: waits (or the turn is no longer this engine's: it stops here), goes on,
 * or ends stopped (the person asked; the turn is left running for the reply to end it).
 */
export async function waitForPerson(
  db: Db,
  chatId: string,
  engineId: string,
  turnId: string,
): Promise<'stop' | 'go on' | 'stopping'> {
  return transaction(db, async (tx) => {
    const lease = await lockChatTurnLease(tx, chatId, engineId, turnId)
    if (!lease.held) return 'stop'
    // Waiting now would leave the stop with no engine to carry it out.
    if (lease.stopping) return 'stopping'
    const [row] = await tx<{ waiting: boolean; allowed: boolean }[]>`
      select bool_or(tool_call ->> 'status' = 'waiting') as waiting,
             bool_or(tool_call ->> 'status' = 'allowed') as allowed
        from chat_messages where turn_id = ${turnId} and tool_call is not null`
    if (!row?.waiting || row.allowed) return 'go on'
    await moveTurns(tx, 'waiting', { ids: [turnId], from: ['running'], owner: engineId })
    return 'stop'
  })
}

/** What this engine was replying to goes back in line for the next engine, at once (it is stopping). */
export async function releaseTurns(db: Db, engineId: string, ids: string[]): Promise<void> {
  await moveTurns(db, 'pending', { ids, from: ['running'], owner: engineId })
}

/** How long (ms, by the database's clock) until the next turn a provider's outage holds is tried again. */
export async function nextDueTurn(db: Db): Promise<number | null> {
  const [row] = await db<{ inMs: number | null }[]>`
    select extract(epoch from min(not_before) - now())::float8 * 1000 as in_ms
      from chat_turns where status = 'blocked' and not_before > now()`
  return row?.inMs ?? null
}

// --- what a reply keeps on its turn ---------------------------------------------------------------

/** Counts a model call that did not end the turn. */
export function countTurnCall(db: Db, id: string, costMicros: number) {
  return db`update chat_turns set model_calls = model_calls + 1,
                  cost_usd_micros = cost_usd_micros + ${costMicros}, updated_at = now()
             where id = ${id}`
}

/** The turn's memory recall, recorded once (recall health counts chats from here). */
export async function recordRecall(
  db: Db,
  id: string,
  outcome: 'succeeded' | 'failed',
): Promise<void> {
  await db`update chat_turns set recall = ${outcome}, recalled_at = now()
            where id = ${id} and recall is null`
}

/**
 * A question gate of a chat was answered (POST /v1/gates/chat/{chatId}/decision): the os.ask_ceo call
 * that opened it is done with the answer, and the reply goes on.
 */
export async function questionAnswered(
  tx: Db,
  gate: { id: string; chatId: string },
  answer: { decision: string; note?: string; answers?: unknown; choice?: string },
): Promise<void> {
  const result = JSON.stringify({
    decision: answer.decision,
    ...(answer.choice !== undefined ? { choice: answer.choice } : {}),
    ...(answer.answers !== undefined ? { answers: answer.answers } : {}),
    ...(answer.note !== undefined ? { note: answer.note } : {}),
  })
  const [message] = await tx<{ turnId: string | null }[]>`
    update chat_messages
       set tool_call = tool_call || jsonb_build_object('status', 'done', 'result', ${result}::text)
     where chat_id = ${gate.chatId} and gate_id = ${gate.id}
     returning turn_id`
  chatChanged(tx, gate.chatId)
  if (message?.turnId) await moveTurns(tx, 'pending', { ids: [message.turnId], from: ['waiting'] })
}

import { ApiError } from '../../../shared/errors.js'
import type { Gate, GateDecision, GateListQuery } from '../../../shared/schemas/gates.js'
import { literalIn, onCommit, transaction, type Db } from '../../db/sql.js'
import { recordSpan } from '../../traces/index.js'
import {
  appendEvent,
  gateColumns,
  reportSetbacks,
  toGate,
  transition,
  type GateRow,
  type RunRow,
} from '../runs/index.js'
import { idFilter, idPrefixFilter, readPage } from '../../db/paging.js'
import { questionAnswered } from '../chats/index.js'

// Gates (spec: Gate; States and transitions; DESIGN 6): a gated call opens a gate and its run waits
// (waiting_on_gate, not under way). The one decision that lands moves the run back in line.

export interface OpenGate {
  kind: 'tool' | 'question'
  tool?: string
  arguments?: Record<string, unknown>
  owner?: string
  approval?: string
  summary?: string | null
  choices?: { key: string; label: string }[] | null
  questions?: string[] | null
  journalStep: number
}

/** Opens the question gate of os.ask_ceo in a chat (DESIGN 11), in the caller's transaction. */
export async function openChatGate(
  tx: Db,
  chat: { enterpriseId: string; id: string },
  question: {
    questions: string[]
    choices: { key: string; label: string }[]
    summary: string | null
  },
): Promise<Gate> {
  const [row] = await tx<GateRow[]>`
    insert into gates (enterprise_id, chat_id, kind, tool, summary, choices, questions)
    values (${chat.enterpriseId}, ${chat.id}, 'question', 'os.ask_ceo', ${question.summary},
            ${tx.json(question.choices)}, ${tx.json(question.questions)})
    returning *`
  return toGate(row!)
}

/** Opens a gate for a running run, which waits on it (DESIGN 6); both in the caller's transaction. */
export async function openGate(tx: Db, run: RunRow, gate: OpenGate): Promise<Gate> {
  const [row] = await tx<GateRow[]>`
    insert into gates (enterprise_id, run_id, task_id, kind, tool, arguments, owner, approval, summary, choices,
                       questions, journal_step)
    values (${run.enterpriseId}, ${run.id}, ${run.taskId}, ${gate.kind}, ${gate.tool ?? null},
            ${gate.arguments ? tx.json(gate.arguments as never) : null}, ${gate.owner ?? null}, ${gate.approval ?? null},
            ${gate.summary ?? null}, ${gate.choices ? tx.json(gate.choices) : null},
            ${gate.questions ? tx.json(gate.questions) : null}, ${gate.journalStep})
    returning *`
  await transition(
    tx,
    run,
    'waiting_on_gate',
    {},
    { gateId: row!.id, kind: gate.kind, tool: gate.tool ?? null },
  )
  return toGate({ ...row!, taskSlug: run.taskSlug })
}

/**
 * GET /v1/gates: the gates waiting, newest first (spec: a plain array of gates waiting), every one
 * unless page or limit is given; or (status decided, issue 51) the gates decided, newest decision
 * first, always paged: they grow without end. Each order is an index's (gates_waiting, gates_decided),
 * and a task's decided gates are read through gates_task_decided. The status is written into the
 * statement: a partial index's predicate is proved from constants only (literalIn).
 */
export async function listGates(
  db: Db,
  enterpriseId: string,
  query: Pick<
    GateListQuery,
    'idPrefix' | 'taskId' | 'runId' | 'kind' | 'status' | 'page' | 'limit'
  >,
): Promise<Gate[]> {
  const decided = query.status === 'decided'
  const paged = decided || query.page !== undefined || query.limit !== undefined
  const page = readPage(query, ['createdAt'])
  const rows = await db<GateRow[]>`
    select ${gateColumns(db)} from gates g
     where g.enterprise_id = ${enterpriseId} and ${literalIn(db, 'g.status', [decided ? 'decided' : 'waiting'])}
       ${idPrefixFilter(db, 'g.id', query.idPrefix)}
       ${idFilter(db, 'g.task_id', query.taskId)} ${idFilter(db, 'g.run_id', query.runId)}
       ${query.kind ? db`and g.kind = ${query.kind}` : db``}
     order by ${decided ? db`g.decided_at desc, g.id desc` : db`g.created_at desc, g.id desc`}
     ${paged ? db`limit ${page.limit} offset ${page.offset}` : db``}`
  return rows.map(toGate)
}

export async function getGate(db: Db, enterpriseId: string, id: string): Promise<Gate> {
  const [row] = await db<
    GateRow[]
  >`select ${gateColumns(db)} from gates g where g.enterprise_id = ${enterpriseId} and g.id = ${id}`
  if (!row) throw new ApiError('gate_not_found', `No gate ${id} in this enterprise.`)
  return toGate(row)
}

/** The gate opened for a journal step of a run (the loop reads its decision when the run resumes). */
export async function gateOfStep(db: Db, runId: string, step: number): Promise<Gate | undefined> {
  const [row] = await db<GateRow[]>`
    select ${gateColumns(db)} from gates g where g.run_id = ${runId} and g.journal_step = ${step}
     order by g.created_at desc limit 1`
  return row && toGate(row)
}

/**
 * Decides a waiting gate (spec: Gate decision): exactly one of any number of concurrent decisions lands
 * (the gate's row lock); a decided gate is 409 gate_not_waiting. A choice must be a key of the gate's
 * own choices. The run goes back in line and its executor carries the decision out once.
 */
export async function decideGate(
  db: Db,
  enterpriseId: string,
  id: string,
  input: GateDecision,
  decidedBy: string,
): Promise<Gate> {
  return transaction(db, async (tx) => {
    // Locked in the order every path takes (docs/locks.md): the gate's run or chat first, then the
    // gate. A run's end and a chat's closing take theirs first too, and then close its waiting gates.
    const [of] = await tx<{ runId: string | null; chatId: string | null }[]>`
      select run_id, chat_id from gates where enterprise_id = ${enterpriseId} and id = ${id}`
    if (!of) throw new ApiError('gate_not_found', `No gate ${id} in this enterprise.`)
    if (of.runId) await tx`select 1 from runs where id = ${of.runId} for no key update`
    if (of.chatId) await tx`select 1 from chats where id = ${of.chatId} for no key update`
    const [gate] = await tx<GateRow[]>`select * from gates where id = ${id} for no key update`
    if (!gate) throw new ApiError('gate_not_found', `No gate ${id} in this enterprise.`)
    if (gate.status !== 'waiting') {
      throw new ApiError(
        'gate_not_waiting',
        `Gate ${id} was already decided (${gate.decision ?? 'closed'}).`,
        {
          decision: gate.decision,
        },
      )
    }
    if (input.choice !== undefined && !(gate.choices ?? []).some((c) => c.key === input.choice)) {
      const keys = (gate.choices ?? []).map((c) => c.key)
      throw new ApiError(
        'invalid_request',
        `choice: ${keys.length ? `one of ${keys.join(', ')}` : 'this gate offers no choices'}; got "${input.choice}".`,
      )
    }
    await tx`
      update gates
         set status = 'decided', decision = ${input.decision}, note = ${input.note ?? null},
             answers = ${input.answers === undefined ? null : tx.json(input.answers as never)},
             choice = ${input.choice ?? null}, decided_by = ${decidedBy}, decided_at = now()
       where id = ${id}`
    const decided = await getGate(tx, enterpriseId, id)
    if (gate.chatId) await questionAnswered(tx, { id, chatId: gate.chatId }, input)
    if (gate.runId) {
      const [run] = await tx<
        RunRow[]
      >`select * from runs where id = ${gate.runId} for no key update`
      // The wait, from the gate's opening to this decision, in the run's trace (issue 49): whichever
      // process opened it and however long ago, its times and the run's context are stored.
      if (run)
        onCommit(tx, () =>
          recordSpan(
            'gate wait',
            {
              'osd.gate.id': id,
              'osd.gate.kind': gate.kind,
              'osd.gate.tool': gate.tool ?? undefined,
              'osd.gate.decision': input.decision,
              'osd.gate.decided_by': decidedBy,
              'osd.run.id': run.id,
              'osd.enterprise.id': enterpriseId,
            },
            { start: gate.createdAt, end: new Date(decided.decidedAt ?? Date.now()) },
            run.traceParent,
          ),
        )
      if (run?.status === 'waiting_on_gate') {
        await appendEvent(tx, run, 'gate.decided', {
          gateId: id,
          decision: input.decision,
          decidedBy,
          // Who, in words, for the lines that show the event (issue 51): the feed keeps it as it was.
          ...(decided.decidedByName ? { decidedByName: decided.decidedByName } : {}),
        })
        await transition(tx, run, 'pending', {}, { gateId: id, because: `gate ${input.decision}` })
      }
      // A person turning a run's call down calls for the task's improvement (DESIGN 10).
      if (gate.taskId && (input.decision === 'reject' || input.decision === 'request_changes'))
        await reportSetbacks(tx, [
          {
            enterpriseId,
            taskId: gate.taskId,
            runId: gate.runId,
            because: `gate ${input.decision}`,
          },
        ])
    }
    return decided
  })
}

/**
 * Answers the question a chat waits on: the gate named by gateId, else the chat's newest waiting one
 * (spec: POST /v1/gates/chat/{chatId}/decision).
 */
export async function decideChatGate(
  db: Db,
  enterpriseId: string,
  chatId: string,
  input: GateDecision & { gateId?: string },
  decidedBy: string,
): Promise<Gate> {
  const { gateId, ...decision } = input
  const [gate] = await db<{ id: string }[]>`
    select id from gates
     where enterprise_id = ${enterpriseId} and chat_id = ${chatId}
       and ${gateId ? db`id = ${gateId}` : db`status = 'waiting'`}
     order by created_at desc limit 1`
  if (!gate) throw new ApiError('gate_not_found', `Chat ${chatId} waits on no question.`)
  return decideGate(db, enterpriseId, gate.id, decision, decidedBy)
}

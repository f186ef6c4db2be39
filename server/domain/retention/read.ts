import postgres from 'postgres'
import { ApiError } from '../../../shared/errors.js'
import { isUuid } from '../../../shared/ids.js'
import type { ChatDetail } from '../../../shared/schemas/chats.js'
import type { ExecutionDetail } from '../../../shared/schemas/executions.js'
import type { RunSteps } from '../../../shared/schemas/forks.js'
import type { Chat } from '../../../shared/schemas/chats.js'
import type { Run, RunDetail, RunRef } from '../../../shared/schemas/runs.js'
import { idPrefixFilter } from '../../db/paging.js'
import type { Db } from '../../db/sql.js'
import {
  chatNotFound,
  getChatDetail,
  toChat,
  toChatMessage,
  type ChatRow,
  type DetailQuery,
  type MessageRow,
} from '../chats/index.js'
import {
  actorNames,
  executionDetailOf,
  executionOfRuns,
  forksOf,
  getExecutionDetail,
  getRunDetail,
  getRunLog,
  listSteps,
  runNotFound,
  toEvent,
  toGate,
  toRun,
  toStep,
  type EventRow,
  type GateRow,
  type RunRow,
  type StepRow,
} from '../runs/index.js'
import type { LongPollWait } from '../long-poll/index.js'
import { readMember } from './files.js'

// Reading back what the retention pass archived (issue 46): GET /v1/runs/{id} and GET /v1/chats/{id}
// answer an archived run or chat as they did before it left, with archived: true, from the one gzip
// member that holds it. The live tables are asked first: an archived one costs a miss there and one
// index lookup, a live one nothing more than before.

interface Located {
  file: string
  byteOffset: number
  byteLength: number
}

async function locate(db: Db, enterpriseId: string, id: string): Promise<Located | undefined> {
  if (!isUuid(id)) return undefined
  const [row] = await db<Located[]>`
    select m.file, m.byte_offset, m.byte_length
      from archive_index i join archive_members m on m.id = i.member_id
     where i.id = ${id}::uuid and m.enterprise_id = ${enterpriseId}`
  return row
}

interface Line {
  type: string
  id: string
  executionId?: string
  text: string
}

const header = /^\{"type":"(\w+)","id":"([0-9a-f-]{36})"(?:,"executionId":"([0-9a-f-]{36})")?/

/** The member's lines, each with its kind and ids read from its start; the data left unparsed. */
function linesOf(member: string): Line[] {
  const lines: Line[] = []
  for (let start = 0; start < member.length;) {
    let end = member.indexOf('\n', start)
    if (end < 0) end = member.length
    const text = member.slice(start, end)
    const match = header.exec(text)
    if (match) lines.push({ type: match[1]!, id: match[2]!, executionId: match[3], text })
    start = end + 1
  }
  return lines
}

const dataOf = <T>(line: Line): T => (JSON.parse(line.text) as { data: T }).data

type Stored = Record<string, unknown>

/**
 * A row as the archive keeps it (to_jsonb: the table's column names, times as text) as the live code
 * reads it (postgres.js: camelCase names, times as Dates). Only the top level: json values stay as
 * stored.
 */
function revive<T>(row: Stored): T {
  const out: Stored = {}
  for (const [key, value] of Object.entries(row)) {
    const timed = key.endsWith('_at') || key === 'not_before'
    out[postgres.toCamel(key)] = timed && typeof value === 'string' ? new Date(value) : value
  }
  return out as T
}

interface RunRecord {
  run: Stored
  events: Stored[]
  journal: Stored[]
  log: { body: string } | null
  gates: Stored[]
  /** The execution's closure, on its first run's record (execution_closures). */
  closure: Stored | null
}

/**
 * An archived run of the enterprise, with the other runs of its execution and their gates (one member
 * holds all).
 */
async function readRun(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  id: string,
): Promise<
  { record: RunRecord; execution: RunRow[]; gates: Stored[]; closedAt: Date | null } | undefined
> {
  const located = await locate(db, enterpriseId, id)
  if (!located) return undefined
  const lines = linesOf(await readMember(archiveDir, located))
  const line = lines.find((l) => l.type === 'run' && l.id === id)
  if (!line) return undefined
  const records = lines
    .filter((l) => l.type === 'run' && l.executionId === line.executionId)
    .map((l) => dataOf<RunRecord>(l))
  const closure = records.find((r) => r.closure)?.closure
  return {
    record: dataOf<RunRecord>(line),
    execution: records.map((r) => revive<RunRow>(r.run)),
    gates: records.flatMap((r) => r.gates),
    closedAt: closure ? revive<{ closedAt: Date }>(closure).closedAt : null,
  }
}

/** An archived run of the enterprise as the lists showed it while live (its input, say). */
export async function archivedRun(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  id: string,
): Promise<Run | undefined> {
  const found = await readRun(db, archiveDir, enterpriseId, id)
  return found && toRun(revive<RunRow>(found.record.run))
}

const refOf = (r: RunRow): RunRef => ({
  id: r.id,
  status: r.status,
  taskId: r.taskId,
  taskSlug: r.taskSlug,
  createdAt: r.createdAt.toISOString(),
})

/**
 * The model calls of a run's journal as RunDetail.cost counts them (runs/journal modelCallTotals): a
 * fork's copied steps were paid for by its original, and count for it alone.
 */
function modelCalls(journal: Stored[]) {
  const totals = {
    modelCalls: 0,
    inputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 0,
  }
  for (const entry of journal) {
    if (entry.kind !== 'model' || entry.copied === true) continue
    const usage = ((entry.response as Stored | null)?.usage ?? {}) as Record<string, unknown>
    totals.modelCalls += 1
    totals.inputTokens += Number(usage.input ?? 0) || 0
    totals.cacheReadTokens += Number(usage.cacheRead ?? 0) || 0
    totals.cacheWriteTokens += Number(usage.cacheWrite ?? 0) || 0
    totals.outputTokens += Number(usage.output ?? 0) || 0
  }
  return totals
}

/** An archived run as GET /v1/runs/{id} answered it while it was live, with archived: true. */
export async function archivedRunDetail(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  id: string,
  afterEventId?: string,
): Promise<RunDetail | undefined> {
  const found = await readRun(db, archiveDir, enterpriseId, id)
  if (!found) return undefined
  const { record, execution } = found
  const run = revive<RunRow>(record.run)
  // Task and version are read live, as for a live run: a task deleted since shows as null.
  const [[task], [version]] = await Promise.all([
    db<{ id: string; slug: string; name: string; status: string }[]>`
      select id, slug, name, status from tasks where enterprise_id = ${enterpriseId} and id = ${run.taskId}`,
    db<{ id: string; number: number }[]>`
      select id, number from task_versions where id = ${run.taskVersionId}`,
  ])
  const events = record.events.map((e) => revive<EventRow & { id: string }>(e))
  const after = afterEventId ? events.findIndex((e) => e.id === afterEventId) : -1
  const kept = record.gates.map((g) => revive<GateRow>(g))
  // Who decided, in words, read now (as for a live gate): the archive kept only decidedBy.
  const names = await actorNames(
    db,
    enterpriseId,
    kept.flatMap((g) => (g.decidedBy ? [g.decidedBy] : [])),
  )
  const gates = kept
    .map((g) => ({
      ...g,
      taskSlug: run.taskSlug,
      decidedByName: g.decidedBy ? (names.get(g.decidedBy) ?? null) : null,
    }))
    .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1))
  const previous = run.previousRunId ? execution.find((r) => r.id === run.previousRunId) : undefined
  const next = execution
    .filter((r) => r.previousRunId === id)
    .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime())
  // A fork joins its original's execution, so the archive's member holds it too.
  const forks = forksOf(next)
  return {
    run: toRun(run),
    events: events.slice(after + 1).map(toEvent),
    gates: gates.map(toGate),
    task: task ?? null,
    version: version ?? null,
    previous: previous ? refOf(previous) : null,
    next: next.map(refOf),
    execution: { id: run.executionId, runCount: execution.length },
    cost: {
      usdCents: run.costUsdMicros / 10_000,
      unpriced: (run.unpricedCalls ?? 0) > 0,
      ...modelCalls(record.journal),
    },
    ...(forks.length ? { forks } : {}),
    archived: true,
  }
}

/**
 * GET /v1/runs/{id}: the live run (archived: false), else the archived one (archived: true), else 404
 * run_not_found.
 */
export async function runDetail(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  id: string,
  query: { afterEventId?: string; waitSeconds?: number } = {},
  wait?: LongPollWait,
): Promise<RunDetail> {
  try {
    return { ...(await getRunDetail(db, enterpriseId, id, query, wait)), archived: false }
  } catch (err) {
    // An archived run has no event to come: it answers at once.
    if (!(err instanceof ApiError && err.code === 'run_not_found')) throw err
    const archived = await archivedRunDetail(db, archiveDir, enterpriseId, id, query.afterEventId)
    if (!archived) throw err
    return archived
  }
}

/**
 * GET /v1/executions/{id}: the live execution (archived: false), else the archived one, from the member
 * that holds all its runs (archived: true), else 404 execution_not_found. Any of its run ids finds it,
 * as a live one.
 */
export async function executionDetail(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  id: string,
): Promise<ExecutionDetail> {
  try {
    return { ...(await getExecutionDetail(db, enterpriseId, id)), archived: false }
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 'execution_not_found')) throw err
    const found = await readRun(db, archiveDir, enterpriseId, id)
    if (!found) throw err
    const runs = found.execution
      .filter((r) => r.status !== 'skipped_overlap')
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : 1))
    // As live: a refused start (skipped_overlap) is no execution's run, unless its id is the execution's.
    const own = runs.some((r) => r.id === id || r.executionId === id)
    if (!own) throw err
    const execution = executionOfRuns(found.execution, found.closedAt)
    return { ...(await executionDetailOf(db, enterpriseId, execution, runs)), archived: true }
  }
}

/** GET /v1/runs/{id}/log: the live run's, else the archived run's; 404 log_not_found without one. */
export async function runLog(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  id: string,
): Promise<{ runId: string; body: string }> {
  try {
    return await getRunLog(db, enterpriseId, id)
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 'run_not_found')) throw err
    const found = await readRun(db, archiveDir, enterpriseId, id)
    if (!found) throw runNotFound(id)
    if (!found.record.log) throw new ApiError('log_not_found', `Run ${id} has no log stored.`)
    return { runId: id, body: found.record.log.body }
  }
}

/**
 * GET /v1/runs/{id}/steps: the live run's, else the archived run's as they were, none forkable (a fork
 * of an archived run is not found); 404 run_not_found without either.
 */
export async function runSteps(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  id: string,
): Promise<RunSteps> {
  try {
    return await listSteps(db, enterpriseId, id)
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 'run_not_found')) throw err
    const found = await readRun(db, archiveDir, enterpriseId, id)
    if (!found) throw err
    // A gated call's gate: its run's, or for a fork's copied step its original's (same execution).
    const gates = new Map(found.gates.map((g) => [g.id as string, revive<GateRow>(g)]))
    const steps = found.record.journal
      .map((entry) => {
        const row = revive<StepRow>(entry)
        const gateId = row.kind === 'tool' ? row.request.gateId : undefined
        const gate = typeof gateId === 'string' ? gates.get(gateId) : undefined
        return {
          ...row,
          copied: row.copied ?? false,
          gateStatus: gate ? (gate.status as StepRow['gateStatus']) : null,
          gateDecision: gate?.decision ?? null,
        }
      })
      .sort((a, b) => a.step - b.step)
    const archived = `run ${id} is archived: a fork of it is not found`
    return { runId: id, steps: steps.map((row) => toStep(row, archived)) }
  }
}

interface ChatRecord {
  chat: Stored
  messages: Stored[]
  gates: Stored[]
}

/** An archived chat as GET /v1/chats/{id} answered it (limit, afterMessageId), with archived: true. */
export async function archivedChatDetail(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  id: string,
  query: DetailQuery,
): Promise<ChatDetail | undefined> {
  const located = await locate(db, enterpriseId, id)
  if (!located) return undefined
  const line = linesOf(await readMember(archiveDir, located)).find(
    (l) => l.type === 'chat' && l.id === id,
  )
  if (!line) return undefined
  const record = dataOf<ChatRecord>(line)
  const chat = revive<ChatRow>(record.chat)
  const gates = new Map(record.gates.map((g) => [g.id as string, revive<GateRow>(g)]))
  let messages = record.messages.map((m) => {
    const row = revive<MessageRow>(m)
    const gate = row.gateId ? gates.get(row.gateId) : undefined
    return {
      ...row,
      gateQuestions: gate?.questions ?? null,
      gateChoices: gate?.choices ?? null,
      gateStatus: gate?.status ?? null,
      gateDecision: gate?.decision ?? null,
      gateChoice: gate?.choice ?? null,
      gateAnswers: gate?.answers ?? null,
      gateNote: gate?.note ?? null,
    }
  })
  if (query.afterMessageId !== undefined) {
    const after = messages.findIndex((m) => m.id === query.afterMessageId)
    if (after < 0)
      throw new ApiError(
        'invalid_request',
        `afterMessageId: no message ${query.afterMessageId} in chat ${id}.`,
      )
    messages = messages.slice(after + 1)
  }
  // 1..200, as ChatDetailQuery has read it.
  if (query.limit !== undefined) messages = messages.slice(-query.limit)
  return {
    ...toChat({ ...chat, unread: 0, replying: false }),
    messages: messages.map(toChatMessage),
    archived: true,
  }
}

/**
 * GET /v1/chats/{id}: the live chat (archived: false), else the archived one (archived: true), else
 * 404 chat_not_found.
 */
export async function chatDetail(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  id: string,
  query: DetailQuery,
  wait?: LongPollWait,
): Promise<ChatDetail> {
  try {
    return { ...(await getChatDetail(db, enterpriseId, id, query, wait)), archived: false }
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 'chat_not_found')) throw err
    const archived = await archivedChatDetail(db, archiveDir, enterpriseId, id, query)
    if (!archived) throw chatNotFound(id)
    return archived
  }
}

/** How many archived ones a prefix lookup answers at most: enough for osctl to list an ambiguity. */
const prefixMatches = 20

/**
 * The enterprise's archived runs or chats whose id starts with `idPrefix`, as their lists showed them
 * while live (osctl names one by its first characters, issue 51; lists show live rows only): a range
 * of the archive index, then each member that holds a match, read once. The index does not say which
 * kind an id is: an id of the other kind is left out once its member is read.
 */
export async function archivedByPrefix(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  type: 'run',
  idPrefix: string,
): Promise<Run[]>
export async function archivedByPrefix(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  type: 'chat',
  idPrefix: string,
): Promise<Chat[]>
export async function archivedByPrefix(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  type: 'run' | 'chat',
  idPrefix: string,
): Promise<(Run | Chat)[]> {
  const rows = await db<(Located & { id: string; memberId: string })[]>`
    select i.id, i.member_id::text, m.file, m.byte_offset, m.byte_length
      from archive_index i join archive_members m on m.id = i.member_id
     where m.enterprise_id = ${enterpriseId} ${idPrefixFilter(db, 'i.id', idPrefix)}
     order by i.id
     limit ${prefixMatches * 2}`
  const wanted = new Set(rows.map((r) => r.id))
  const members = new Map(rows.map((r) => [r.memberId, r]))
  const found: (Run | Chat)[] = []
  for (const member of members.values()) {
    for (const line of linesOf(await readMember(archiveDir, member))) {
      if (line.type !== type || !wanted.has(line.id)) continue
      found.push(
        type === 'run'
          ? toRun(revive<RunRow>(dataOf<RunRecord>(line).run))
          : toChat({
              ...revive<ChatRow>(dataOf<ChatRecord>(line).chat),
              unread: 0,
              replying: false,
            }),
      )
    }
  }
  return found.sort((a, b) => (a.id < b.id ? -1 : 1)).slice(0, prefixMatches)
}

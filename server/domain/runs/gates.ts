import type { Gate } from '../../../shared/schemas/gates.js'
import type { Db, Fragment } from '../../db/sql.js'

// A run's gates as read (spec: RunDetail.gates): here, below gates/, which opens and decides them and
// reads them with these same columns, so that a run's detail needs nothing of gates/.

export interface GateRow {
  id: string
  enterpriseId: string
  runId: string | null
  taskId: string | null
  chatId: string | null
  kind: 'tool' | 'question'
  tool: string | null
  arguments: Record<string, unknown> | null
  owner: string | null
  approval: string | null
  summary: string | null
  choices: { key: string; label: string }[] | null
  questions: string[] | null
  journalStep: number | null
  status: 'waiting' | 'decided'
  decision: Gate['decision']
  note: string | null
  answers: unknown
  choice: string | null
  decidedBy: string | null
  /** Read by gateColumns (actorName); a row read without it has none. */
  decidedByName?: string | null
  decidedAt: Date | null
  createdAt: Date
  taskSlug?: string | null
}

export function toGate(row: GateRow): Gate {
  return {
    id: row.id,
    kind: row.kind,
    status: row.status,
    tool: row.tool,
    arguments: row.arguments,
    owner: row.owner,
    approval: row.approval,
    summary: row.summary,
    choices: row.choices,
    questions: row.questions,
    runId: row.runId,
    chatId: row.chatId,
    taskId: row.taskId,
    taskSlug: row.taskSlug ?? null,
    decision: row.decision,
    note: row.note,
    answers: row.answers ?? null,
    choice: row.choice,
    decidedBy: row.decidedBy,
    decidedByName: row.decidedByName ?? null,
    decidedAt: row.decidedAt?.toISOString() ?? null,
    createdAt: row.createdAt.toISOString(),
  }
}

export const gateColumns = (db: Db) =>
  db`g.*, (select task_slug from runs r where r.id = g.run_id) as task_slug,
     ${actorName(db, db`g.decided_by`, db`g.enterprise_id`)} as decided_by_name`

const uuidPattern = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'

/**
 * Who an actor (`token:<id>`, `user:<id>`, as a caller records itself) is, in words (issue 51): the
 * token's name, of the enterprise's own tokens only; the person's name, never their email (a token
 * that reads gates, a CI job's, is no reader of people: the spec keeps people to the portal), so null
 * for one who gave no name, as for anything else (webhook, the run ending, a token since deleted). A
 * gates reader holds no scope that reads tokens or people, so the answer names them itself.
 * The patterns guard the casts: a malformed id reads as no one rather than failing the read.
 */
const actorName = (db: Db, actor: Fragment, enterpriseId: Fragment) => db`
  case
    when ${actor} ~ ${`^token:${uuidPattern}$`} then
      (select t.name from api_tokens t
        where t.id = substr(${actor}, 7)::uuid and t.enterprise_id = ${enterpriseId})
    when ${actor} ~ ${`^user:${uuidPattern}$`} then
      (select nullif(u.name, '') from users u where u.id = substr(${actor}, 6)::uuid)
  end`

/**
 * The names of these actors, as gateColumns reads them for live gates (actorName): for gates read back
 * from the archive (retention), whose rows kept only who decided.
 */
export async function actorNames(
  db: Db,
  enterpriseId: string,
  actors: string[],
): Promise<Map<string, string | null>> {
  const wanted = [...new Set(actors)]
  if (wanted.length === 0) return new Map()
  const rows = await db<{ actor: string; name: string | null }[]>`
    select a.actor, ${actorName(db, db`a.actor`, db`${enterpriseId}::uuid`)} as name
      from unnest(${wanted}::text[]) as a(actor)`
  return new Map(rows.map((r) => [r.actor, r.name]))
}

export async function listRunGates(db: Db, enterpriseId: string, runId: string): Promise<Gate[]> {
  const rows = await db<GateRow[]>`
    select ${gateColumns(db)} from gates g where g.enterprise_id = ${enterpriseId} and g.run_id = ${runId}
     order by g.created_at desc, g.id desc`
  return rows.map(toGate)
}

import type { Gate } from '../../../shared/schemas/gates.js'
import type { Db } from '../../db/sql.js'

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
    decidedAt: row.decidedAt?.toISOString() ?? null,
    createdAt: row.createdAt.toISOString(),
  }
}

export const gateColumns = (db: Db) =>
  db`g.*, (select task_slug from runs r where r.id = g.run_id) as task_slug`

export async function listRunGates(db: Db, enterpriseId: string, runId: string): Promise<Gate[]> {
  const rows = await db<GateRow[]>`
    select ${gateColumns(db)} from gates g where g.enterprise_id = ${enterpriseId} and g.run_id = ${runId}
     order by g.created_at desc, g.id desc`
  return rows.map(toGate)
}

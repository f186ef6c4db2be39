import type { Plan, PlanDetail } from '../../../shared/schemas/plans.js'
import { ApiError } from '../../../shared/errors.js'
import type { Db } from '../../db/sql.js'
import { idFilter } from '../../db/paging.js'

// Plans a run wrote with os.write_plan (spec: Plans (planned)).

interface PlanRow {
  id: string
  kind: string
  status: string
  title: string
  items: Plan['items']
  producedByRunId: string | null
  chatSessionId: string | null
  createdAt: Date
}

const toPlan = (row: PlanRow): Plan => ({
  id: row.id,
  kind: row.kind,
  status: row.status,
  title: row.title,
  items: row.items,
  producedByRunId: row.producedByRunId,
  chatSessionId: row.chatSessionId,
  createdAt: row.createdAt.toISOString(),
})

export async function writePlan(
  tx: Db,
  enterpriseId: string,
  runId: string,
  plan: { title: string; items: Plan['items'] },
): Promise<Plan> {
  const [row] = await tx<PlanRow[]>`
    insert into plans (enterprise_id, title, items, produced_by_run_id)
    values (${enterpriseId}, ${plan.title}, ${tx.json(plan.items as never)}, ${runId})
    returning *`
  return toPlan(row!)
}

export async function listPlans(
  db: Db,
  enterpriseId: string,
  filters: { status?: string; kind?: string; chatSessionId?: string; producedByRunId?: string },
): Promise<Plan[]> {
  const rows = await db<PlanRow[]>`
    select * from plans where enterprise_id = ${enterpriseId}
      ${filters.status ? db`and status = ${filters.status}` : db``}
      ${filters.kind ? db`and kind = ${filters.kind}` : db``}
      ${idFilter(db, 'chat_session_id', filters.chatSessionId)}
      ${idFilter(db, 'produced_by_run_id', filters.producedByRunId)}
     order by created_at desc, id desc limit 200`
  return rows.map(toPlan)
}

/** One plan, its items, the run and the gates behind it. */
export async function getPlan(db: Db, enterpriseId: string, id: string): Promise<PlanDetail> {
  const [row] = await db<
    PlanRow[]
  >`select * from plans where enterprise_id = ${enterpriseId} and id = ${id}`
  if (!row) throw new ApiError('plan_not_found', `No plan ${id} in this enterprise.`)
  const gates = row.producedByRunId
    ? await db<
        PlanDetail['gates']
      >`select id, kind, tool, status, decision from gates where run_id = ${row.producedByRunId} order by created_at`
    : []
  return { ...toPlan(row), gates }
}

import { ApiError } from '../../../shared/errors.js'
import type { ChatToolGrant } from '../../../shared/schemas/chats.js'
import type { Db } from '../../db/sql.js'
import { uuidPattern, type ChatCaller } from './chats.js'

// The "always" answers of a caller for a member's tool (DESIGN 11): stored by a decision, used by the
// reply to run such a call unasked; the caller's own, never another's.

export async function listGrants(
  db: Db,
  enterpriseId: string,
  caller: ChatCaller,
  memberId: string | undefined,
): Promise<ChatToolGrant[]> {
  if (memberId !== undefined && !uuidPattern.test(memberId)) return []
  const rows = await db<{ id: string; memberId: string; tool: string; createdAt: Date }[]>`
    select id, member_id, tool, created_at from chat_tool_grants
     where enterprise_id = ${enterpriseId} and caller = ${caller}
       ${memberId ? db`and member_id = ${memberId}` : db``}
     order by created_at desc, id`
  return rows.map((r) => ({ ...r, createdAt: r.createdAt.toISOString() }))
}

export async function deleteGrant(
  db: Db,
  enterpriseId: string,
  caller: ChatCaller,
  grantId: string,
): Promise<void> {
  const rows = await db`
    delete from chat_tool_grants
     where enterprise_id = ${enterpriseId} and caller = ${caller} and id = ${grantId} returning id`
  if (rows.length === 0)
    throw new ApiError('grant_not_found', `No tool grant ${grantId} of this caller.`)
}

/** Whether the caller that sent a turn's message granted the member's tool for good. */
export async function isGranted(
  db: Db,
  caller: ChatCaller | null,
  memberId: string,
  tool: string,
): Promise<boolean> {
  if (!caller) return false
  const [row] = await db<{ found: boolean }[]>`
    select exists (select 1 from chat_tool_grants
                    where caller = ${caller} and member_id = ${memberId} and tool = ${tool}) as found`
  return row!.found
}

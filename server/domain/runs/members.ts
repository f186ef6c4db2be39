import { type Db, type Fragment } from '../../db/sql.js'

// Members a run can go to (DESIGN 5: among free holders of the role, the one who waited longest).

/**
 * Locks members a start or admission may give a run to, in id order (so two lockers never deadlock):
 * the holders of the roles and the named members. Only runs that wait while their member is busy
 * (overlapPolicy skip) need this; one that runs beside other work takes no lock, so no start waits on
 * another for a shared holder. With `wait: false` it takes only what is free (`skip locked`) and
 * answers false when another transaction held one of them: for a caller already holding other locks,
 * which must not wait for more.
 */
export async function lockMembers(
  tx: Db,
  which: { roleIds?: string[]; memberIds?: string[] },
  { wait = true }: { wait?: boolean } = {},
): Promise<boolean> {
  const { roleIds = [], memberIds = [] } = which
  if (roleIds.length === 0 && memberIds.length === 0) return true
  const [row] = await tx<{ wanted: number; locked: number }[]>`
    with wanted as (
      select id from members
       where (removed_at is null
              and id in (select member_id from role_members where role_id = any(${tx.array(roleIds)}::uuid[])))
          or id = any(${tx.array(memberIds)}::uuid[])
    ), locked as (
      select id from members where id in (select id from wanted)
       order by id
       for no key update ${wait ? tx`` : tx`skip locked`}
    )
    select (select count(*) from wanted)::int as wanted, (select count(*) from locked)::int as locked`
  return row!.locked === row!.wanted
}

/** Whether a member holds a queued or running run (DESIGN 5: member busy), as a SQL condition. */
export function memberBusy(db: Db, memberId: Fragment): Fragment {
  return db`exists (select 1 from runs b where b.member_id = ${memberId} and b.status in ('queued', 'running'))`
}

/**
 * The members of the roles (and the named members), the one who waited longest first: a member's last
 * assignment is the latest queued_at of its runs, never assigned counting as longest. Busy: it holds a
 * queued or running run.
 */
export async function membersFor(
  tx: Db,
  which: { roleIds?: string[]; memberIds?: string[] },
): Promise<Members> {
  const { roleIds = [], memberIds = [] } = which
  const rows = await tx<{ id: string; roleIds: string[]; busy: boolean }[]>`
    select m.id,
           array_remove(array_agg(rm.role_id), null) as role_ids,
           ${memberBusy(tx, tx`m.id`)} as busy
      from members m
      left join role_members rm on rm.member_id = m.id and rm.role_id = any(${tx.array(roleIds)}::uuid[])
     where (m.removed_at is null and rm.role_id is not null) or m.id = any(${tx.array(memberIds)}::uuid[])
     group by m.id
     order by (select max(r.queued_at) from runs r where r.member_id = m.id) asc nulls first, m.id`
  return new Members(rows)
}

/** Members in waited-longest order, as assignments within one transaction change it. */
export class Members {
  constructor(private readonly order: { id: string; roleIds: string[]; busy: boolean }[]) {}

  /**
   * Gives a run of the role to the free holder who waited longest, or to the longest-waiting holder
   * when the task runs beside other work (overlapPolicy os); that member then waited least.
   */
  take(roleId: string, overlapPolicy: string): string | undefined {
    const i = this.order.findIndex(
      (m) => m.roleIds.includes(roleId) && (overlapPolicy === 'os' || !m.busy),
    )
    if (i < 0) return undefined
    const [member] = this.order.splice(i, 1)
    this.order.push({ ...member!, busy: true })
    return member!.id
  }

  /** Gives a run back to the member it already had (coming back from a gate) if it may have it now. */
  retake(memberId: string, overlapPolicy: string): boolean {
    const i = this.order.findIndex((m) => m.id === memberId)
    const member = this.order[i]
    if (member?.busy && overlapPolicy !== 'os') return false
    if (member) {
      this.order.splice(i, 1)
      this.order.push({ ...member, busy: true })
    }
    return true
  }
}

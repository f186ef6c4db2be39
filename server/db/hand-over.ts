import postgres from 'postgres'

// The hand-over of an older data dir's objects to osd's own role (issue 41), apart from the embedded
// server's start (embedded.ts), which calls it: also used by tests that give a cloned database to a role.

/**
 * Gives `owner` every object of the osd database that a superuser owns: what an older osd, connected as
 * the superuser, made (tables with their indexes, triggers and sequences, views, functions, types,
 * schemas). An extension's own objects stay where they are. Asked at every start, done once: a query
 * that finds nothing to do afterwards. In one transaction, so a start that fails half way leaves the
 * data dir as it was for the next one.
 */
export async function handOver(
  superuserUrl: string,
  owner: string,
  log: { info(obj: object, msg?: string): void },
): Promise<void> {
  const sql = postgres(superuserUrl, { max: 1, onnotice: () => undefined, connect_timeout: 30 })
  try {
    const statements = await sql<{ statement: string }[]>`
      with superusers as (select oid from pg_roles where rolsuper),
      ours as (
        select oid from pg_namespace
         where nspname not in ('pg_catalog', 'information_schema')
           and nspname not like 'pg_toast%' and nspname not like 'pg_temp%'
      ),
      extension_owned as (select classid, objid from pg_depend where deptype = 'e')
      select format('alter schema %I owner to %I', n.nspname, ${owner}::text) as statement, 0 as ord
        from pg_namespace n
       where n.oid in (select oid from ours) and n.nspowner in (select oid from superusers)
      union all
      select format('alter %s %s owner to %I',
                    case c.relkind when 'S' then 'sequence' when 'v' then 'view'
                                   when 'm' then 'materialized view' when 'f' then 'foreign table'
                                   else 'table' end,
                    c.oid::regclass, ${owner}::text), 1
        from pg_class c
       where c.relnamespace in (select oid from ours) and c.relkind in ('r', 'p', 'v', 'm', 'S', 'f')
         and c.relowner in (select oid from superusers)
         and ('pg_class'::regclass::oid, c.oid) not in (select classid, objid from extension_owned)
         -- A sequence of a column (serial, identity) goes with its table.
         and not exists (select 1 from pg_depend d
                          where d.classid = 'pg_class'::regclass and d.objid = c.oid
                            and d.refclassid = 'pg_class'::regclass and d.deptype in ('a', 'i'))
      union all
      select format('alter %s %s owner to %I',
                    case p.prokind when 'p' then 'procedure' when 'a' then 'aggregate'
                                   else 'function' end,
                    p.oid::regprocedure, ${owner}::text), 2
        from pg_proc p
       where p.pronamespace in (select oid from ours) and p.proowner in (select oid from superusers)
         and ('pg_proc'::regclass::oid, p.oid) not in (select classid, objid from extension_owned)
      union all
      select format('alter %s %s owner to %I', case t.typtype when 'd' then 'domain' else 'type' end,
                    t.oid::regtype, ${owner}::text), 3
        from pg_type t
       where t.typnamespace in (select oid from ours) and t.typowner in (select oid from superusers)
         and (t.typtype in ('e', 'd', 'r')
              or (t.typtype = 'c' and (select relkind from pg_class where oid = t.typrelid) = 'c'))
         and ('pg_type'::regclass::oid, t.oid) not in (select classid, objid from extension_owned)
       order by ord, statement`
    if (statements.length === 0) return
    await sql.begin(async (tx) => {
      for (const { statement } of statements) await tx.unsafe(statement)
    })
    log.info(
      { role: owner, objects: statements.length },
      'embedded PostgreSQL: the osd database and its objects handed over to its own role',
    )
  } finally {
    await sql.end()
  }
}

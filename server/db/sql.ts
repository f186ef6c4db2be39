import postgres from 'postgres'

/** The pool or a transaction: domain functions take either, so callers compose them (STYLE, Domain). */
export type Db = postgres.ISql<Record<string, unknown>>
export type Sql = postgres.Sql<Record<string, unknown>>
export type Tx = postgres.TransactionSql<Record<string, unknown>>
export type Fragment = postgres.Fragment

export interface SqlOptions {
  max?: number
  applicationName?: string
}

/** A pool whose rows come back camelCased and whose bigints (counts, sums) are numbers. */
export function createSql(url: string, options: SqlOptions = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    transform: postgres.camel,
    onnotice: () => undefined,
    connection: { application_name: options.applicationName ?? 'osd' },
    types: {
      bigint: {
        to: 20,
        from: [20],
        serialize: (value: number) => String(value),
        parse: (value: string) => Number(value),
      },
    },
  }) as unknown as Sql
}

/**
 * A pool that has answered one query. postgres.js learns the server's array types while its first
 * connection starts; an array parameter of the very first query is sent before that and arrives as a bare
 * `a,b` string (22P02 malformed array literal). One query first, and arrays are right from then on.
 */
export async function readySql(url: string, options: SqlOptions = {}): Promise<Sql> {
  const sql = createSql(url, options)
  await sql`select 1`
  return sql
}

/** Runs fn in a transaction, or inside the caller's transaction when db already is one. */
export function transaction<T>(db: Db, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const pool = db as Partial<Sql>
  return typeof pool.begin === 'function' ? (pool.begin(fn) as Promise<T>) : fn(db as Tx)
}

/** PostgreSQL's unique_violation, optionally on one named constraint. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint_name?: string }
  return e?.code === '23505' && (!constraint || e.constraint_name === constraint)
}

import postgres from 'postgres'
import { connectionOf } from './url.js'

/** The pool or a transaction: domain functions take either, so callers compose them (STYLE, Domain). */
export type Db = postgres.ISql<Record<string, unknown>>
export type Sql = postgres.Sql<Record<string, unknown>>
export type Tx = postgres.TransactionSql<Record<string, unknown>>
export type Fragment = postgres.Fragment

export interface SqlOptions {
  max?: number
  applicationName?: string
  /**
   * Called with each statement and its parameters as it is sent (postgres.js `debug`), for tests that
   * count what a piece of work reads. Errors of such a pool carry their parameters: not for production.
   */
  onQuery?: (query: string, parameters: readonly unknown[]) => void
  /** The server's notices (dropped unless given): for tests that read what auto_explain says. */
  onNotice?: (message: string) => void
  /** Settings of every connection (`plan_cache_mode`, say), as startup parameters. */
  settings?: Record<string, string>
}

/**
 * A pool whose column names come back camelCased and whose bigints (counts, sums) are numbers. Only
 * column names: postgres.camel would also rename the keys inside every json value it reads, so a run's
 * input `{"repo_name": 1}` would come back as `{"repoName": 1}`. What callers send is kept as sent.
 */
export function createSql(url: string, options: SqlOptions = {}): Sql {
  // DATABASE_URL as libpq reads it: a socket directory, TLS files (server/db/url.ts).
  const connection = connectionOf(url)
  return postgres(connection.url, {
    ...connection.options,
    max: options.max ?? 10,
    transform: { column: { from: postgres.toCamel, to: postgres.fromCamel } },
    onnotice: options.onNotice
      ? (notice) => options.onNotice!(String(notice.message))
      : () => undefined,
    connection: { application_name: options.applicationName ?? 'osd', ...options.settings },
    // While the server is away (restarting, failing over) each failed connect doubles the wait before
    // the next, up to a second: postgres.js's own back-off grows to 20 s, which would keep osd away
    // that long after the server is back.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
    // A server that does not answer at all is reported (503) in seconds, not the default 30.
    connect_timeout: 10,
    ...(options.onQuery
      ? {
          debug: (_: number, query: string, parameters: unknown[]) =>
            options.onQuery!(query, parameters),
        }
      : {}),
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

/** The pool each open transaction of transaction() belongs to, and what waits for its commit. */
const open = new WeakMap<object, { pool: Sql; committed: (() => void)[] }>()

/**
 * Runs fn in a transaction, or inside the caller's transaction when db already is one. What onCommit
 * was given inside runs once the transaction committed, and never if it rolled back. So does what it
 * was given inside a savepoint of it (`tx.savepoint`), and not if the savepoint rolled back.
 */
export async function transaction<T>(db: Db, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const pool = db as Partial<Sql>
  if (typeof pool.begin !== 'function') return fn(db as Tx)
  const committed: (() => void)[] = []
  const result = (await pool.begin((tx) => {
    follow(tx, db as Sql, committed)
    return fn(tx)
  })) as T
  for (const hook of committed) hook()
  return result
}

/**
 * Keeps what `tx` (a transaction or a savepoint) is given by onCommit in `committed`, and makes each
 * savepoint of it do the same in a list of its own, added to `committed` once the savepoint's work is
 * kept. A savepoint's handle is another object than its transaction's: unknown to onCommit, its hooks
 * ran at once (a run's start counted before its transaction committed, and on a rollback), and its
 * NOTIFY went out on the transaction's connection with `synchronous_commit off`, which then held for
 * the whole transaction (a run's end and its events committed unflushed, against DESIGN 3).
 */
function follow(tx: Tx, pool: Sql, committed: (() => void)[]): void {
  open.set(tx, { pool, committed })
  const savepoint = tx.savepoint
  tx.savepoint = (async (...args: unknown[]) => {
    const fn = args[args.length - 1]
    // The tagged-template form is one statement: no hook can be given inside it.
    if (typeof fn !== 'function') return (savepoint as (...a: unknown[]) => unknown)(...args)
    const kept: (() => void)[] = []
    const within = (sp: Tx) => {
      follow(sp, pool, kept)
      return (fn as (sp: Tx) => unknown)(sp)
    }
    const result = await (args.length === 1
      ? savepoint(within)
      : savepoint(args[0] as string, within))
    committed.push(...kept)
    return result
  }) as Tx['savepoint']
}

/**
 * A transaction whose `begin` goes out with its first statements and whose `commit` (fn calls it) with
 * its last, on one connection of the pool: a round trip for each group of statements fn sends together,
 * rather than one more for each of begin and commit. For hot paths (a chat reply's spend and message):
 * each round trip costs a write and a wake-up on both sides. fn sends statements without awaiting
 * `begin`; it commits by sending `commit()` with its last statements (Promise.all), else it is committed
 * once fn returns. A failure rolls it back. onCommit hooks and notifyAfterCommit work as in transaction().
 */
export async function pipelinedTransaction<T>(
  pool: Sql,
  fn: (tx: Tx, commit: () => Promise<unknown>) => Promise<T>,
): Promise<T> {
  const connection = await pool.reserve()
  const tx = connection as unknown as Tx
  const committed: (() => void)[] = []
  open.set(tx, { pool, committed })
  let ending: Promise<{ command: string }> | undefined
  // Sent a few microtasks late, so that it follows every statement fn sends with it, whatever their
  // order in its Promise.all: still in the same write to the server (postgres.js writes at setImmediate).
  const commit = () =>
    (ending ??= (async () => {
      await null
      await null
      return (await connection`commit`) as unknown as { command: string }
    })())
  /** Whether the commit went through: after a failed statement PostgreSQL answers it ROLLBACK. */
  const wasCommitted = async () => (await ending?.catch(() => undefined))?.command === 'COMMIT'
  try {
    // Sent, not awaited: it precedes fn's first statements on the connection; a failure fails them.
    connection`begin`.catch(() => undefined)
    const result = await fn(tx, commit)
    if ((await commit()).command !== 'COMMIT')
      throw new Error('pipelinedTransaction: a statement failed; the transaction was rolled back')
    open.delete(tx)
    for (const hook of committed) hook()
    return result
  } catch (err) {
    open.delete(tx)
    // fn failed after its commit went through: what it wrote is there, and its hooks run.
    if (await wasCommitted()) for (const hook of committed) hook()
    else await connection`rollback`.catch(() => undefined)
    throw err
  } finally {
    connection.release()
  }
}

/**
 * In a statement's select list: its transaction commits without waiting for the WAL flush
 * (synchronous_commit off, for this transaction only). For writes a database crash may lose without
 * harm, because they are simply made again or never mattered: notifications, read marks, a claim the
 * next engine makes again. Such a commit neither queues behind other commits' flushes nor holds
 * PostgreSQL's single notify lock through one, and what it wrote is flushed with the next commit that
 * waits. Nothing a person was told is stored, and nothing acted on, may use it.
 */
export function unflushedCommit(db: Db): Fragment {
  return db`set_config('synchronous_commit', 'off', true)`
}

/**
 * The statements that follow in this transaction use their prepared statement's generic plan, made once
 * per connection, instead of planning each run anew with its values. For a hot transaction of fixed
 * statements whose best plan does not depend on the values (the engine's step: issue 30, where planning
 * was 1.8 ms of a 40-chain's 4.7 ms a step, and its generic plans execute no slower). Send it with the
 * transaction's first statement: it takes effect from the next. The plans test (test/server/db/plans)
 * checks those generic plans read runs through its indexes.
 */
export async function genericPlans(tx: Db): Promise<void> {
  await tx`select set_config('plan_cache_mode', 'force_generic_plan', true)`
}

/**
 * `column in ('a', 'b')` for a fixed list of words, written into the statement rather than sent as a
 * parameter: a partial index's predicate (runs_lane_busy: `status in (...)`) is proved from constants
 * only, so a statement that sends its list as a parameter cannot use the index once PostgreSQL plans it
 * generically (after five runs of a prepared statement), and scans the table instead (issue 30: 4.6 ms
 * a statement at 20,000 runs, growing with them).
 */
export function literalIn(db: Db, column: string, values: readonly string[]): Fragment {
  if (!/^([a-z_]+\.)?[a-z_]+$/.test(column))
    throw new Error(`literalIn takes a plain column name, not ${JSON.stringify(column)}`)
  for (const v of values)
    if (!/^[a-z_]+$/.test(v))
      throw new Error(`literalIn takes plain words, not ${JSON.stringify(v)}`)
  return db.unsafe(
    `${column} in (${values.map((v) => `'${v}'`).join(', ')})`,
  ) as unknown as Fragment
}

/** Runs `hook` once what `db` wrote is committed: after its transaction, or now when it has none. */
export function onCommit(db: Db, hook: (pool: Sql) => void): void {
  const tx = open.get(db)
  if (tx) tx.committed.push(() => hook(tx.pool))
  else hook(db as Sql)
}

const unsent = new WeakMap<Sql, Map<string, Set<string>>>()

/**
 * NOTIFY once what `db` wrote is committed, gathered per pool and sent in one statement a tick later.
 * For hot channels (run events): a transaction that notifies holds PostgreSQL's single notify lock from
 * its commit until its commit record is flushed, so notifying inside every start would let only one
 * start commit at a time. Listeners re-read the database, so a notification lost with a crashed process
 * only waits for their sweep.
 */
export function notifyAfterCommit(db: Db, channel: string, payloads: Iterable<string>): void {
  const sending = [...payloads]
  if (sending.length === 0) return
  onCommit(db, (pool) => {
    let channels = unsent.get(pool)
    if (!channels) {
      channels = new Map()
      unsent.set(pool, channels)
      setImmediate(() => {
        unsent.delete(pool)
        // One statement for every channel: a notification each, of every payload gathered.
        const sent = [...channels!].flatMap(([name, values]) => [...values].map((v) => [name, v]))
        // Notifications are not kept across a crash anyway: their commit need not wait for a flush.
        pool`
          select ${unflushedCommit(pool)}, pg_notify(n, v)
            from unnest(${pool.array(sent.map(([n]) => n!))}::text[],
                        ${pool.array(sent.map(([, v]) => v!))}::text[]) as x(n, v)`.catch(
          () => undefined,
        )
      })
    }
    let values = channels.get(channel)
    if (!values) channels.set(channel, (values = new Set()))
    for (const payload of sending) values.add(payload)
  })
}

/**
 * `sql.listen`, with an unlisten that always holds. When its listening connection drops (PostgreSQL
 * restarted, a failover, a proxy's timeout), postgres.js listens again on a new one with registrations
 * of its own, and the unlisten it answered before then finds nothing to remove (postgres 3.4): the
 * callback went on being called, beside the next listener's. Here it is not called once unlistened.
 */
export async function listenUntilStopped(
  sql: Sql,
  channel: string,
  heard: (payload: string) => void,
  onListen?: () => void,
): Promise<{ unlisten(): Promise<void> }> {
  let live = true
  const listener = await sql.listen(
    channel,
    (payload) => {
      if (live) heard(payload)
    },
    onListen && (() => live && onListen()),
  )
  return {
    async unlisten() {
      live = false
      await listener.unlisten()
    },
  }
}

/** PostgreSQL's unique_violation, optionally on one named constraint. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint_name?: string }
  return e?.code === '23505' && (!constraint || e.constraint_name === constraint)
}

/**
 * A failure PostgreSQL chose to break a tie (deadlock_detected, serialization_failure): the transaction
 * did nothing, and the same work may simply be done again.
 */
export function isRetryable(err: unknown): boolean {
  const code = (err as { code?: string })?.code
  return code === '40P01' || code === '40001'
}

/**
 * Does a piece of work again, at once, when PostgreSQL cancelled its transaction to break a deadlock
 * or a serialisation conflict (isRetryable): the cancelled transaction did nothing, and the same work
 * gets the same outcome once the other transaction is through. `work` must begin its own transaction
 * (transaction() or pipelinedTransaction() on the pool) and do nothing outside the database that it
 * would be wrong to do twice; its onCommit hooks run once, after the commit that counts. Up to
 * `attempts` tries; the last failure is thrown. The engine's writes for a run and a chat turn go
 * through it, so a run's end is never left to a lease takeover (issue 42).
 */
export async function retryConflicts<T>(work: () => Promise<T>, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work()
    } catch (err) {
      if (!isRetryable(err) || attempt >= attempts) throw err
    }
  }
}

// What says the database cannot be reached just now, rather than that a statement failed: the socket's
// errors, postgres.js's own connection errors, and PostgreSQL's refusals while it stops, crashes or
// starts (57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now), too many connections
// (53300) and class 08 (connection exception).
const unreachable = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  '57P01',
  '57P02',
  '57P03',
  '53300',
])

/** Whether `err` says the database is away (DATABASE_URL's server, or the embedded one restarting). */
export function isDatabaseUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code
  if (typeof code !== 'string') return false
  return unreachable.has(code) || /^08[0-9A-Z]{3}$/.test(code)
}

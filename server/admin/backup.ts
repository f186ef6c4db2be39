import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { constants, createReadStream, createWriteStream } from 'node:fs'
import { open, rename, rm, stat, statfs } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import { finished } from 'node:stream/promises'
import { createGunzip, createGzip } from 'node:zlib'
import { packageVersion } from '../../shared/paths.js'
import { listMigrations, migrate, migrationsDir } from '../db/migrate.js'
import type { Sql, Tx } from '../db/sql.js'

// osd admin backup | restore (issue 46; DESIGN 15): a consistent copy of the whole database while osd
// runs, made with nothing but a connection, so it works the same on the embedded PostgreSQL (which has
// no pg_dump) and on DATABASE_URL's server.
//
// The file is gzip over lines:
//
//   OSD-BACKUP 1
//   {header: format, made, osd version, the migrations applied, the tables in restore order, sequences}
//   for each table:
//     {"table": name, "columns": [...]}
//     the rows as COPY ... TO STDOUT writes them (text format: one row a line, a backslash escaped)
//     \.                                   (COPY's own end of data: no row can be this line)
//     {"end": name, "rows": n, "sha256": hex of the rows' bytes}
//   {"end": "backup", "tables": n}
//
// Every table is copied in one REPEATABLE READ READ ONLY transaction: one snapshot, so the copy is
// what the database held at one instant, whatever osd does meanwhile. Secrets stay sealed with the
// instance's server key, which the copy does not hold (osd refuses to start on a key that does not
// open them: domain/sealed/secret-check.ts).

const magic = 'OSD-BACKUP 1'
const endOfData = '\\.'

export class BackupError extends Error {}

/** A backup that does not read as it was written: cut short, changed, or not whole. */
const damaged = (what: string) => new BackupError(`the backup is damaged: ${what}`)

export interface BackupHeader {
  format: 'osd-backup'
  version: 1
  createdAt: string
  osdVersion: string
  /** The migrations applied to the copied database: its schema. */
  migrations: { id: number; name: string }[]
  /** In restore order: a table after those its foreign keys name. */
  tables: string[]
  sequences: { name: string; lastValue: number; isCalled: boolean }[]
  databaseBytes: number
}

interface TableShape {
  name: string
  columns: string[]
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`

/**
 * The tables osd keeps (its schema's ordinary, logged tables: an unlogged table such as chat_readers
 * holds only who reads a stream now), with their columns (generated ones are computed again), in an
 * order that restores each after the tables its foreign keys name. A deferrable key (a task's current
 * version) is left to the end of the restore's transaction.
 */
async function schemaOf(db: Sql | Tx): Promise<TableShape[]> {
  const [tables, columns, keys] = await Promise.all([
    db<{ name: string }[]>`
      select c.relname as name from pg_class c
       where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p')
         and c.relpersistence = 'p' and c.relname <> 'osd_migrations'
       order by c.relname`,
    db<{ table: string; column: string }[]>`
      select c.relname as table, a.attname as column
        from pg_attribute a join pg_class c on c.oid = a.attrelid
       where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p')
         and a.attnum > 0 and not a.attisdropped and a.attgenerated = ''
       order by c.relname, a.attnum`,
    db<{ child: string; parent: string }[]>`
      select c.relname as child, p.relname as parent
        from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_class p on p.oid = k.confrelid
       where k.contype = 'f' and not k.condeferrable
         and k.connamespace = current_schema()::regnamespace and c.oid <> p.oid`,
  ])
  const byTable = new Map<string, string[]>(tables.map((t) => [t.name, []]))
  for (const c of columns) byTable.get(c.table)?.push(c.column)
  const parents = new Map<string, Set<string>>(tables.map((t) => [t.name, new Set()]))
  for (const k of keys) if (byTable.has(k.parent)) parents.get(k.child)?.add(k.parent)
  const ordered: string[] = []
  const placed = new Set<string>()
  while (ordered.length < tables.length) {
    const next = tables.find(
      (t) => !placed.has(t.name) && [...parents.get(t.name)!].every((p) => placed.has(p)),
    )
    if (!next)
      throw new BackupError(
        `the foreign keys of ${tables
          .filter((t) => !placed.has(t.name))
          .map((t) => t.name)
          .join(', ')} form a circle: no restore order`,
      )
    ordered.push(next.name)
    placed.add(next.name)
  }
  return ordered.map((name) => ({ name, columns: byTable.get(name)! }))
}

async function appliedMigrations(db: Sql | Tx): Promise<{ id: number; name: string }[]> {
  const [exists] = await db<{ found: boolean }[]>`
    select to_regclass('osd_migrations') is not null as found`
  if (!exists!.found) return []
  return db<{ id: number; name: string }[]>`select id, name from osd_migrations order by id`
}

export interface SpaceCheck {
  /** Bytes the disk must keep free after the copy (default: 5% of the disk, at least 64 MB). */
  keepFreeBytes?: number
}

export interface BackupOptions extends SpaceCheck {
  /** Replace FILE when it exists (--force); else the backup is refused. */
  replace?: boolean
  /** Stops the copy (osd admin's SIGINT or SIGTERM): FILE.partial is removed, its reason thrown. */
  signal?: AbortSignal
}

/** FILE already there: refused unless replaced on purpose, since it may be the one good copy. */
async function refuseExisting(file: string, options: BackupOptions): Promise<void> {
  const found = await stat(file).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined
    throw new BackupError(`cannot write ${file}: ${err.message}`)
  })
  // --force cannot replace a directory: it was the rename's EISDIR and its stack, after the copy.
  if (found?.isDirectory())
    throw new BackupError(`${file} is a directory: name a file (--out DIR/osd-backup.gz)`)
  if (found && !options.replace)
    throw new BackupError(`${file} exists: name another file, or add --force to replace it`)
}

/** FILE to read: there, and a file (a directory was "damaged: does not inflate (EISDIR)"). */
async function readable(file: string): Promise<void> {
  const found = await stat(file).catch((err: Error) => {
    throw new BackupError(`cannot read ${file}: ${err.message}`)
  })
  if (found.isDirectory()) throw new BackupError(`cannot read ${file}: it is a directory`)
  // An empty file, or one of another format, is no copy at all (it was "damaged: does not inflate").
  if (found.size === 0) throw new BackupError(`${file} is empty: not an osd backup`)
  const handle = await open(file, constants.O_RDONLY)
  const start = Buffer.alloc(2)
  try {
    await handle.read(start, 0, 2, 0)
  } finally {
    await handle.close()
  }
  if (start[0] !== 0x1f || start[1] !== 0x8b)
    throw new BackupError(`${file} is not an osd backup (an osd backup is gzip; this file is not)`)
}

async function freeSpace(dir: string): Promise<{ free: number; size: number }> {
  const fs = await statfs(dir)
  return { free: fs.bavail * fs.bsize, size: fs.blocks * fs.bsize }
}

function keepFreeOf(size: number, options: SpaceCheck): number {
  return options.keepFreeBytes ?? Math.max(64 * 1024 * 1024, Math.floor(size * 0.05))
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`

export interface BackupSummary {
  file: string
  bytes: number
  tables: number
  rows: number
  migrations: string
  seconds: number
}

/**
 * osd admin backup --out FILE: every table of the database, in one snapshot, to FILE (gzip). The
 * disk is looked at first: the copy needs at most the database's size (it holds no indexes and is
 * compressed), and the disk must keep `keepFreeBytes` free after it; otherwise it is refused before a
 * byte is written. An existing FILE is refused unless `replace` (--force). Written to FILE.partial,
 * fsynced and renamed: FILE is whole or absent. While it writes, a disk filling up anyway (other
 * writers) stops it, and the partial file is removed.
 */
export async function backup(
  sql: Sql,
  out: string,
  options: BackupOptions = {},
): Promise<BackupSummary> {
  const started = Date.now()
  const file = resolve(out)
  const dir = dirname(file)
  await refuseExisting(file, options)
  const [size] = await sql<{ bytes: number }[]>`
    select pg_database_size(current_database())::bigint as bytes`
  const databaseBytes = size!.bytes
  const disk = await freeSpace(dir).catch((err: Error) => {
    throw new BackupError(`cannot write to ${dir}: ${err.message}`)
  })
  const keepFree = keepFreeOf(disk.size, options)
  if (disk.free - databaseBytes < keepFree)
    throw new BackupError(
      `not enough free space in ${dir}: ${mb(disk.free)} free; the copy may take up to the database's ` +
        `${mb(databaseBytes)}, and ${mb(keepFree)} must stay free (--keep-free). Free some space or ` +
        'write the backup elsewhere.',
    )

  const partial = `${file}.partial`
  const output = createWriteStream(partial, { flags: 'wx', mode: 0o600 })
  await once(output, 'open').catch((err: NodeJS.ErrnoException) => {
    throw new BackupError(
      err.code === 'EEXIST'
        ? `${partial} exists: another backup is being written there, or one was stopped (remove it)`
        : `cannot write ${partial}: ${err.message}`,
    )
  })
  const gzip = createGzip()
  gzip.pipe(output)
  // A write the disk refuses (full, a file size limit, an I/O error) stops the copy: unheard, the
  // stream's error ended the process with Node's stack, and left FILE.partial filling the disk.
  let writeFailed: BackupError | undefined
  const writing = new AbortController()
  const fail = (err: NodeJS.ErrnoException) => {
    writeFailed ??= new BackupError(
      err.code === 'ENOSPC'
        ? `stopped: no space left in ${dir}; the partial copy was removed`
        : `cannot write ${partial}: ${err.message}; the partial copy was removed`,
    )
    writing.abort(writeFailed)
  }
  output.on('error', fail)
  gzip.on('error', fail)
  const write = async (chunk: Buffer | string) => {
    if (writeFailed) throw writeFailed
    options.signal?.throwIfAborted()
    if (!gzip.write(chunk)) await drained(gzip, writing.signal)
  }
  let checked = 0
  /** Stops the copy when the disk fills up anyway: looked at every 32 MB written. */
  const watchDisk = async () => {
    if (output.bytesWritten - checked < 32 * 1024 * 1024) return
    checked = output.bytesWritten
    const now = await freeSpace(dir)
    if (now.free < keepFree)
      throw new BackupError(
        `stopped: only ${mb(now.free)} left free in ${dir} (${mb(keepFree)} must stay free)`,
      )
  }

  let tables = 0
  let rows = 0
  let migrations: { id: number; name: string }[] = []
  try {
    await sql.begin('isolation level repeatable read read only', async (tx) => {
      const shapes = await schemaOf(tx)
      migrations = await appliedMigrations(tx)
      const sequences = await sequencesOf(tx)
      const header: BackupHeader = {
        format: 'osd-backup',
        version: 1,
        createdAt: new Date().toISOString(),
        osdVersion: packageVersion,
        migrations,
        tables: shapes.map((s) => s.name),
        sequences,
        databaseBytes,
      }
      await write(`${magic}\n${JSON.stringify(header)}\n`)
      for (const shape of shapes) {
        await write(JSON.stringify({ table: shape.name, columns: shape.columns }) + '\n')
        const hash = createHash('sha256')
        let count = 0
        for await (const chunk of copyOut(tx, shape)) {
          hash.update(chunk)
          count += newlines(chunk)
          await write(chunk)
          await watchDisk()
        }
        await write(
          `${endOfData}\n${JSON.stringify({ end: shape.name, rows: count, sha256: hash.digest('hex') })}\n`,
        )
        tables += 1
        rows += count
      }
      await write(JSON.stringify({ end: 'backup', tables }) + '\n')
    })
    gzip.end()
    await once(output, 'close')
    await fsyncFile(partial)
    // Again: a copy takes minutes, and FILE may have been made meanwhile.
    await refuseExisting(file, options)
    await rename(partial, file)
    await fsyncFile(dir)
  } catch (err) {
    gzip.destroy()
    output.destroy()
    await rm(partial, { force: true })
    throw writeFailed ?? err
  }
  const last = migrations.at(-1)
  return {
    file,
    bytes: (await stat(file)).size,
    tables,
    rows,
    migrations: last ? `${String(last.id).padStart(4, '0')}_${last.name}` : 'none',
    seconds: (Date.now() - started) / 1000,
  }
}

/**
 * A table's rows as COPY ... TO STDOUT writes them, read as they come (the socket paused while the
 * reader is behind). postgres.js 3.4.9 pauses its socket when the stream's buffer is full and resumes
 * it only when the stream is read again; when that last pause comes with the copy's end in the same
 * packet, nothing reads again, and the connection's next answer is never read: the backup stood still
 * after a table of some size. So the socket is resumed once the copy has ended (its `read` is what
 * resumes it).
 */
async function* copyOut(tx: Tx, shape: TableShape): AsyncGenerator<Buffer> {
  const query = tx.unsafe(
    `copy ${ident(shape.name)} (${shape.columns.map(ident).join(', ')}) to stdout`,
  )
  const copy = (await query.readable()) as Readable
  try {
    for await (const chunk of copy.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>)
      yield chunk
  } finally {
    // Left early (a signal, a disk that refuses a write): the copy is cancelled, so the connection
    // takes the transaction's rollback (a copy left standing refused it, and the connection was held
    // until the command's end timed out). What the server sent meanwhile is read and dropped: it
    // sees the cancel only once it can write again. Reading the rest of the table instead took as
    // long as the copy itself would have: minutes after a Ctrl+C on a large table.
    if (!copy.readableEnded) {
      const ended = finished(copy).catch(() => undefined)
      void query.cancel()
      copy.resume()
      await ended
    }
    copy._read(0)
  }
}

async function sequencesOf(tx: Tx): Promise<BackupHeader['sequences']> {
  const names = await tx<{ name: string }[]>`
    select c.relname as name from pg_class c
     where c.relnamespace = current_schema()::regnamespace and c.relkind = 'S' order by c.relname`
  const sequences: BackupHeader['sequences'] = []
  for (const { name } of names) {
    const [row] = await tx.unsafe<{ lastValue: number; isCalled: boolean }[]>(
      `select last_value, is_called from ${ident(name)}`,
    )
    sequences.push({ name, lastValue: row!.lastValue, isCalled: row!.isCalled })
  }
  return sequences
}

async function fsyncFile(path: string): Promise<void> {
  const handle = await open(path, constants.O_RDONLY)
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

function newlines(chunk: Buffer): number {
  let n = 0
  for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) n += 1
  return n
}

// --- reading a backup ----------------------------------------------------------------------------

/** The file's lines, each with its line break (the last may lack one), inflated as they are read. */
async function* linesOf(file: string): AsyncGenerator<Buffer> {
  const input = createReadStream(file).pipe(createGunzip())
  let rest: Buffer = Buffer.alloc(0)
  try {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      let data = rest.length ? Buffer.concat([rest, chunk]) : chunk
      let start = 0
      for (let end = data.indexOf(10); end >= 0; end = data.indexOf(10, start)) {
        yield data.subarray(start, end + 1)
        start = end + 1
      }
      data = data.subarray(start)
      rest = Buffer.from(data)
    }
  } catch (err) {
    throw damaged(`${file} does not inflate (${(err as Error).message})`)
  } finally {
    input.destroy()
  }
  if (rest.length) yield rest
}

const text = (line: Buffer) => line.toString('utf8').replace(/\n$/, '')

function parseJson<T>(line: Buffer | undefined, what: string): T {
  if (!line) throw damaged(`it ends before ${what}`)
  try {
    return JSON.parse(text(line)) as T
  } catch {
    throw damaged(`${what} is not the line expected there`)
  }
}

/**
 * The header, when it is one this osd reads: restore looks at its migrations and sequences before a
 * row is read (a header without them was a TypeError and its stack, after the target was migrated).
 */
function checkHeader(file: string, header: unknown): BackupHeader {
  const h = (header ?? {}) as Partial<BackupHeader>
  if (h.format !== 'osd-backup' || h.version !== 1)
    throw new BackupError(`${file}: a header this osd does not read (format ${String(h.version)})`)
  if (![h.migrations, h.tables, h.sequences].every(Array.isArray))
    throw damaged('the header is not whole')
  return h as BackupHeader
}

/** Reads a backup through, table after table: `onRows` is given each table's rows as they come. */
async function readBackup(
  file: string,
  onHeader: (header: BackupHeader) => Promise<void> | void,
  onTable: (table: TableShape, rows: AsyncIterable<Buffer>) => Promise<void>,
): Promise<{ header: BackupHeader; tables: { name: string; rows: number }[] }> {
  const lines = linesOf(file)
  const next = async () => (await lines.next()).value as Buffer | undefined
  try {
    const first = await next()
    if (!first || text(first) !== magic)
      throw new BackupError(`${file} is not an osd backup (its first line is not "${magic}")`)
    const header = checkHeader(file, parseJson<unknown>(await next(), 'the header'))
    await onHeader(header)
    const tables: { name: string; rows: number }[] = []
    for (const name of header.tables) {
      const shape = parseJson<{ table?: string; columns?: string[] }>(await next(), `table ${name}`)
      if (shape.table !== name || !Array.isArray(shape.columns))
        throw damaged(`table ${name} expected, ${String(shape.table)} found`)
      const hash = createHash('sha256')
      let count = 0
      let ended = false
      async function* rows(): AsyncGenerator<Buffer> {
        for (;;) {
          const line = await next()
          if (!line) throw damaged(`it ends inside table ${name}`)
          if (text(line) === endOfData) {
            ended = true
            return
          }
          hash.update(line)
          count += 1
          yield line
        }
      }
      await onTable({ name, columns: shape.columns }, rows())
      // Whatever onTable left unread is read (and counted) here.
      if (!ended) for await (const line of rows()) void line
      const end = parseJson<{ end?: string; rows?: number; sha256?: string }>(
        await next(),
        `the end of table ${name}`,
      )
      if (end.end !== name) throw damaged(`table ${name} does not end where it should`)
      if (end.rows !== count)
        throw damaged(`table ${name}: ${count} rows read, ${end.rows} written`)
      if (end.sha256 !== hash.digest('hex'))
        throw damaged(`table ${name}: its rows are not those written (checksum)`)
      tables.push({ name, rows: count })
    }
    const end = parseJson<{ end?: string; tables?: number }>(await next(), 'the end of the backup')
    if (end.end !== 'backup' || end.tables !== header.tables.length)
      throw damaged('it does not end as it should')
    if ((await next()) !== undefined) throw damaged('it goes on past its end')
    return { header, tables }
  } finally {
    await lines.return(undefined)
  }
}

export interface VerifySummary {
  file: string
  createdAt: string
  migrations: string
  tables: { name: string; rows: number }[]
  rows: number
}

/** osd admin backup --verify FILE: the whole file read and checked (header, rows and checksums). */
export async function verifyBackup(file: string): Promise<VerifySummary> {
  await readable(file)
  const { header, tables } = await readBackup(
    file,
    () => undefined,
    async () => undefined,
  )
  return {
    file: resolve(file),
    createdAt: header.createdAt,
    migrations: lastMigration(header),
    tables,
    rows: tables.reduce((n, t) => n + t.rows, 0),
  }
}

function lastMigration(header: BackupHeader): string {
  const last = header.migrations.at(-1)
  return last ? `${String(last.id).padStart(4, '0')}_${last.name}` : 'none'
}

/** The tables of the target that hold a row (osd_migrations aside): a restore goes only where none do. */
async function tablesWithRows(sql: Sql): Promise<string[]> {
  const tables = await sql<{ name: string }[]>`
    select c.relname as name from pg_class c
     where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p')
       and c.relname <> 'osd_migrations'
     order by c.relname`
  const full: string[] = []
  for (const { name } of tables) {
    const [row] = await sql.unsafe<{ found: boolean }[]>(
      `select exists (select 1 from ${ident(name)}) as found`,
    )
    if (row!.found) full.push(name)
  }
  return full
}

/** The header alone: the first two lines. */
async function readHeader(file: string): Promise<BackupHeader> {
  const lines = linesOf(file)
  try {
    const first = (await lines.next()).value as Buffer | undefined
    if (!first || text(first) !== magic)
      throw new BackupError(`${file} is not an osd backup (its first line is not "${magic}")`)
    return checkHeader(
      file,
      parseJson<unknown>((await lines.next()).value as Buffer | undefined, 'the header'),
    )
  } finally {
    await lines.return(undefined)
  }
}

/**
 * COPY ... FROM STDIN of `rows`, in `tx`. postgres.js resolves the query with its stream at once, and
 * hands a refusal that comes after the last row (a foreign key checked at the statement's end) to that
 * promise, already resolved; the refusal is taken from there, so it fails the copy instead of leaving
 * it waiting for an end that never comes.
 */
async function copyIn(tx: Tx, statement: string, rows: AsyncIterable<Buffer>): Promise<void> {
  const query = tx.unsafe(statement)
  let refuse: (err: Error) => void = () => undefined
  const refused = new Promise<never>((_, reject) => (refuse = reject))
  refused.catch(() => undefined)
  const refusing = new AbortController()
  const fail = (err: Error) => {
    refuse(err)
    refusing.abort(err)
  }
  // postgres.js 3.4 sets reject on the query as it is made, and calls it with the server's refusal.
  const q = query as unknown as { reject: (err: Error) => void }
  const reject = q.reject
  q.reject = (err: Error) => {
    fail(err)
    reject(err)
  }
  const stream = (await Promise.race([query.writable(), refused])) as unknown as Writable
  stream.on('error', fail)
  try {
    for await (const row of rows) if (!stream.write(row)) await drained(stream, refusing.signal)
  } catch (err) {
    // The file gave out (damaged, cut short): the COPY is failed, so the transaction can roll back
    // (left open, it refused the rollback, and the operator read COPY_IN_PROGRESS); said is the file.
    stream.destroy(err as Error)
    throw err
  }
  const finished = once(stream, 'finish')
  stream.end()
  await Promise.race([finished, refused])
}

/**
 * Waits for `stream` to drain, or throws what `stop` was aborted with. A listener for each wait, gone
 * after it: racing a promise that lives as long as the copy left a reaction on it per wait, and a
 * large table waits hundreds of thousands of times.
 */
async function drained(stream: NodeJS.EventEmitter, stop: AbortSignal): Promise<void> {
  try {
    await once(stream, 'drain', { signal: stop })
  } catch (err) {
    throw stop.aborted ? stop.reason : err
  }
}

export interface RestoreSummary {
  file: string
  tables: number
  rows: number
  migrations: string
  seconds: number
}

/**
 * osd admin restore FILE: into a database that holds no data (a new data dir, or an empty database of
 * DATABASE_URL; migrated or not). The schema is made by the migrations up to the backup's, the rows
 * copied in, table after table, in one transaction (the tables' own triggers off: the rows are as they
 * were, counters and change numbers included), the sequences set; the later migrations run at the
 * next start. The file is checked as it is read: a damaged one restores nothing.
 */
export async function restoreBackup(sql: Sql, file: string): Promise<RestoreSummary> {
  const started = Date.now()
  await readable(file)
  const header = await readHeader(file)
  const known = new Map((await listMigrations(migrationsDir)).map((m) => [m.id, m.name]))
  for (const m of header.migrations)
    if (known.get(m.id) !== m.name)
      throw new BackupError(
        `the backup was made by another osd: its migration ${String(m.id).padStart(4, '0')}_${m.name} ` +
          'is not one of this osd; restore it with the osd version that made it',
      )
  const upTo = header.migrations.at(-1)?.id ?? 0
  const full = await tablesWithRows(sql)
  if (full.length > 0)
    throw new BackupError(
      `the target database holds data (${full.slice(0, 5).join(', ')}${full.length > 5 ? ', …' : ''}): ` +
        'restore into a new data dir or an empty database',
    )
  const ahead = (await appliedMigrations(sql)).filter((m) => m.id > upTo)
  if (ahead.length > 0)
    throw new BackupError(
      `the target database has migrations the backup has not (${ahead.map((m) => m.name).join(', ')}): ` +
        'restore into a new data dir or an empty database',
    )
  await migrate(sql, migrationsDir, { upTo })

  let rows = 0
  let tables = 0
  await sql.begin(async (tx) => {
    const shapes = new Map((await schemaOf(tx)).map((s) => [s.name, s]))
    for (const name of header.tables)
      if (!shapes.has(name))
        throw new BackupError(
          `table ${name} of the backup is not in the schema its migrations make`,
        )
    // The keys that cannot wait for the commit are met by the order of the tables; the others wait.
    await tx`set constraints all deferred`
    for (const name of header.tables)
      await tx.unsafe(`alter table ${ident(name)} disable trigger user`)
    await readBackup(
      file,
      () => undefined,
      async (table, lines) => {
        let count = 0
        async function* counted() {
          for await (const line of lines) {
            count += 1
            yield line
          }
        }
        await copyIn(
          tx,
          `copy ${ident(table.name)} (${table.columns.map(ident).join(', ')}) from stdin`,
          counted(),
        )
        rows += count
        tables += 1
      },
    )
    for (const s of header.sequences)
      await tx`select setval(${ident(s.name)}::regclass, ${s.lastValue}, ${s.isCalled})`
    // The deferred keys are checked now: a table's triggers cannot change with checks pending.
    await tx`set constraints all immediate`
    for (const name of header.tables)
      await tx.unsafe(`alter table ${ident(name)} enable trigger user`)
  })
  return {
    file: resolve(file),
    tables,
    rows,
    migrations: lastMigration(header),
    seconds: (Date.now() - started) / 1000,
  }
}

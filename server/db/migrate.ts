import { lockMigrations } from './locks.js'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { packageVersion, projectRoot } from '../../shared/paths.js'
import type { Sql } from './sql.js'

export const migrationsDir = join(projectRoot, 'migrations')

export interface Migration {
  id: number
  name: string
  file: string
}

export async function listMigrations(dir = migrationsDir): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort()
  return files.map((file) => ({
    id: Number(file.slice(0, 4)),
    name: file.slice(5, -4),
    file: join(dir, file),
  }))
}

/**
 * The database was migrated by a newer osd: it holds a migration this build does not know. osd stops
 * rather than run on a schema it was not written for (graphile-worker refuses the same way). Processes
 * already running when the newer osd migrated keep running: the check is made at start.
 */
export class NewerDatabaseError extends Error {
  override name = 'NewerDatabaseError'
}

/** A migration as osd_migrations records it. */
interface Applied {
  id: number
  name: string
  osdVersion: string | null
}

const label = (m: { id: number; name: string }) => `${String(m.id).padStart(4, '0')}_${m.name}`

/**
 * Refuses a database that holds a migration this build does not know, naming the osd version that
 * applied it (recorded since issue 43; unknown before) and this build's version and last migration.
 */
export function refuseNewer(
  applied: Applied[],
  known: Migration[],
  version = packageVersion,
): void {
  const ids = new Set(known.map((m) => m.id))
  const unknown = applied.filter((m) => !ids.has(m.id)).sort((a, b) => b.id - a.id)[0]
  if (!unknown) return
  const last = known.at(-1)
  const theirs = unknown.osdVersion ? `osd ${unknown.osdVersion}` : 'an osd of unrecorded version'
  throw new NewerDatabaseError(
    `this database was migrated by a newer osd: it holds migration ${label(unknown)}, applied by ` +
      `${theirs}, which this osd (${version}, migrations up to ${last ? label(last) : 'none'}) does ` +
      'not know. Run the newer osd on it, or restore a backup taken before the upgrade; an older osd ' +
      'does not start on a newer schema',
  )
}

/**
 * Applies pending migrations, each once, each in its own transaction, under an advisory lock; the record
 * row is written first so a failed migration leaves nothing behind (graphile-worker's migrate.ts). Each
 * record names the osd version that applied it. A database migrated by a newer osd (one migration this
 * build does not know) is refused before anything is applied: NewerDatabaseError.
 * Returns the names applied by this call. With upTo, only the migrations up to that id.
 */
export async function migrate(
  sql: Sql,
  dir = migrationsDir,
  options: { upTo?: number } = {},
): Promise<string[]> {
  const known = await listMigrations(dir)
  await sql.begin(async (tx) => {
    await lockMigrations(tx)
    await tx`
      create table if not exists osd_migrations (
        id integer primary key,
        name text not null,
        applied_at timestamptz not null default now()
      )`
    // Added here, not by a migration: the check below reads it before any migration is applied.
    await tx`alter table osd_migrations add column if not exists osd_version text`
    refuseNewer(await tx<Applied[]>`select id, name, osd_version from osd_migrations`, known)
  })
  // upTo: the schema of a backup being restored (admin/backup.ts), the later migrations left for the
  // next start.
  const migrations = known.filter((m) => options.upTo === undefined || m.id <= options.upTo)
  const applied: string[] = []
  for (const migration of migrations) {
    const done = await sql.begin(async (tx) => {
      await lockMigrations(tx)
      const [row] = await tx`select 1 from osd_migrations where id = ${migration.id}`
      if (row) return false
      await tx`
        insert into osd_migrations (id, name, osd_version)
        values (${migration.id}, ${migration.name}, ${packageVersion})`
      await tx.unsafe(await readFile(migration.file, 'utf8'))
      return true
    })
    if (done) applied.push(label(migration))
  }
  return applied
}

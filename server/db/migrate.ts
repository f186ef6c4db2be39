import { lockMigrations } from './locks.js'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { projectRoot } from '../../shared/paths.js'
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
 * Applies pending migrations, each once, each in its own transaction, under an advisory lock; the record
 * row is written first so a failed migration leaves nothing behind (graphile-worker's migrate.ts).
 * Returns the names applied by this call. With upTo, only the migrations up to that id.
 */
export async function migrate(
  sql: Sql,
  dir = migrationsDir,
  options: { upTo?: number } = {},
): Promise<string[]> {
  // upTo: the schema of a backup being restored (admin/backup.ts), the later migrations left for the
  // next start.
  const migrations = (await listMigrations(dir)).filter(
    (m) => options.upTo === undefined || m.id <= options.upTo,
  )
  const applied: string[] = []
  for (const migration of migrations) {
    const done = await sql.begin(async (tx) => {
      await lockMigrations(tx)
      await tx`
        create table if not exists osd_migrations (
          id integer primary key,
          name text not null,
          applied_at timestamptz not null default now()
        )`
      const [row] = await tx`select 1 from osd_migrations where id = ${migration.id}`
      if (row) return false
      await tx`insert into osd_migrations (id, name) values (${migration.id}, ${migration.name})`
      await tx.unsafe(await readFile(migration.file, 'utf8'))
      return true
    })
    if (done) applied.push(`${String(migration.id).padStart(4, '0')}_${migration.name}`)
  }
  return applied
}

import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { inject } from 'vitest'
import { readySql, type Sql } from '../../server/db/sql.js'
import { withDatabase } from '../global-setup.js'
import { afterFile } from './after-file.js'

export interface TestDatabase {
  sql: Sql
  url: string
  name: string
}

/**
 * A database of this test file's own, cloned from the migrated template, dropped after the file. Real
 * PostgreSQL, never a mock.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('adminUrl')
  const name = `osd_test_${randomBytes(6).toString('hex')}`
  const admin = postgres(adminUrl, { max: 1, onnotice: () => undefined })
  await admin.unsafe(`create database "${name}" template "${inject('templateDb')}"`)
  const url = withDatabase(adminUrl, name)
  const sql = await readySql(url, { max: 10 })
  afterFile(async () => {
    await sql.end({ timeout: 5 })
    await admin.unsafe(`drop database if exists "${name}" with (force)`)
    await admin.end()
  })
  return { sql, url, name }
}

import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import pino from 'pino'
import postgres from 'postgres'
import { beforeAll, describe, expect, inject, it } from 'vitest'
import { MemoryAsk, MemoryNote, NotePage } from '../../../shared/schemas/memory.js'
import { loadConfig } from '../../../server/config.js'
import { createSql } from '../../../server/db/sql.js'
import { migrate } from '../../../server/db/migrate.js'
import {
  memorySupport,
  recallChatNotes,
  recallNotes,
} from '../../../server/domain/learning/index.js'
import { startDaemon } from '../../../server/serve.js'
import { withDatabase } from '../../global-setup.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { llmTask } from '../../helpers/runs.js'

// Recall that forgives typos (issue 31): with pg_trgm, a word of the question no note holds finds notes
// holding a similar word, on every path (ask, a run's recall, a chat's, the list's search); without it
// (dropped here, as on a server where migration 0023 could not create it) recall is full-text only, a
// duplicate is a note equal after folding, and osd says so once at start. And the migration itself on a
// database whose role may not create the extension.

let t: TestApp
let task: { id: string }
let general: string
let deploys: MemoryNote
let kubernetes: MemoryNote

async function ask(q: string) {
  const res = await t.call('GET', `/v1/tasks/${task.id}/memory/ask?q=${encodeURIComponent(q)}`)
  expect(res.status).toBe(200)
  return MemoryAsk.parse(res.body).notes
}
const ids = (notes: { id: string }[]) => notes.map((n) => n.id)

const train = (text: string, layer = 'enterprise') =>
  t.call('POST', `/v1/tasks/${task.id}/memory/train`, { body: { text, layer } })

beforeAll(async () => {
  t = await createTestApp()
  general = (await t.call('GET', '/v1/teams')).body[0].id
  task = await llmTask(t, { teamId: general, goal: 'Keep the platform running' })
  const a = await train('Deploys to production wait for the Friday freeze to end')
  const b = await train('Kubernetes clusters are upgraded on the first Monday', 'team')
  expect([a.status, b.status]).toEqual([201, 201])
  deploys = MemoryNote.parse(a.body)
  kubernetes = MemoryNote.parse(b.body)
  // Notes about other things, so a search that finds everything would show.
  for (const text of ['Invoices are sent on the 1st', 'Holidays are booked in the HR portal'])
    expect((await train(text)).status).toBe(201)
})

describe('with pg_trgm', () => {
  it('is what the migration made', async () => {
    expect(await memorySupport(t.sql)).toEqual({ trigram: true })
  })

  it('ask finds a note by a misspelt word, ranked below the word as written', async () => {
    const typo = await ask('when can I deplyo')
    expect(ids(typo)).toEqual([deploys.id])
    expect(ids(await ask('kuberntes'))).toEqual([kubernetes.id])
    expect(ids(await ask('kubernets'))).toEqual([kubernetes.id]) // stemming alone finds this one
    const exact = await ask('when can I deploy')
    expect(ids(exact)).toEqual([deploys.id])
    expect(typo[0]!.score).toBeGreaterThan(0)
    expect(typo[0]!.score).toBeLessThan(exact[0]!.score)
    // A word that is like nothing notes hold finds nothing.
    expect(await ask('xylophone')).toEqual([])
  })

  it("a run's recall, a chat's and the list's search forgive the same typo", async () => {
    expect(ids(await recallNotes(t.sql, t.acme.id, task.id, 'when to deplyo'))).toEqual([
      deploys.id,
    ])
    expect(ids(await recallChatNotes(t.sql, t.acme.id, general, 'kuberntes', 5, false))).toEqual([
      kubernetes.id,
    ])
    const listed = NotePage.parse((await t.call('GET', '/v1/memory?q=deplyo')).body)
    expect(ids(listed.notes)).toEqual([deploys.id])
  })

  it('a note nearly the same as another is refused', async () => {
    const res = await train('Deploys to production wait for the Friday freeze to end!!')
    expect(res.body).toMatchObject({ error: 'note_duplicate', duplicateOf: deploys.id })
  })

  it('osd says nothing about it at start', async () => {
    expect(await startLogs(t.dbUrl)).toEqual([])
  })
})

describe('without pg_trgm', () => {
  beforeAll(async () => {
    await t.sql`drop extension pg_trgm cascade`
  })

  it('recall is full-text only: a misspelt word finds nothing, the word as written does', async () => {
    expect(await memorySupport(t.sql)).toEqual({ trigram: false })
    expect(await ask('when can I deplyo')).toEqual([])
    expect(await ask('kuberntes')).toEqual([])
    expect(ids(await ask('when can I deploy'))).toEqual([deploys.id])
    expect(ids(await recallNotes(t.sql, t.acme.id, task.id, 'when to deplyo'))).toEqual([])
    const listed = NotePage.parse((await t.call('GET', '/v1/memory?q=deplyo')).body)
    expect(listed.notes).toEqual([])
  })

  it('a duplicate is a note equal after case and white-space folding', async () => {
    const same = await train('  deploys to production WAIT for the friday freeze to end ')
    expect(same.body).toMatchObject({ error: 'note_duplicate', duplicateOf: deploys.id })
    const near = await train('Deploys to production wait for the Friday freeze to end!!')
    expect(near.status).toBe(201)
  })

  it('osd says so once at start', async () => {
    const warnings = await startLogs(t.dbUrl)
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatchObject({ level: 40, extension: 'pg_trgm' })
    expect(warnings[0]!.msg).toContain('full-text only')
  })
})

describe('a database whose role may not create the extension', () => {
  it('migrates all the same, without pg_trgm, and memory works', async () => {
    const admin = postgres(inject('adminUrl'), { max: 1, onnotice: () => undefined })
    const suffix = randomBytes(4).toString('hex')
    const role = `osd_weak_${suffix}`
    const database = `osd_weak_${suffix}`
    const password = randomBytes(12).toString('hex')
    await admin.unsafe(`create role ${role} login password '${password}'`)
    // The database is not the role's and it holds no CREATE on it: it may make tables in its schema,
    // not extensions (pg_trgm is trusted: CREATE on the database would be enough).
    await admin.unsafe(`create database ${database}`)
    const owner = postgres(withDatabase(inject('adminUrl'), database), { max: 1 })
    await owner.unsafe(`grant create, usage on schema public to ${role}`)
    await owner.end()
    const url = new URL(withDatabase(inject('adminUrl'), database))
    url.username = role
    url.password = password
    const sql = createSql(url.toString(), { max: 1 })
    try {
      const applied = await migrate(sql)
      expect(applied).toContain('0023_memory_impact')
      expect(await memorySupport(sql)).toEqual({ trigram: false })
      const [row] = await sql<{ fuzzy: string | null }[]>`
        select (memory_search_terms(gen_random_uuid(), 'deplyo')).fuzzy::text as fuzzy`
      expect(row).toEqual({ fuzzy: null })
    } finally {
      await sql.end()
      await admin.unsafe(`drop database if exists ${database} with (force)`)
      await admin.unsafe(`drop role if exists ${role}`)
      await admin.end()
    }
  }, 60_000)
})

/** Starts osd (the API alone) on the database and stops it; the warnings it logged about pg_trgm. */
async function startLogs(databaseUrl: string): Promise<Record<string, unknown>[]> {
  const lines: Record<string, unknown>[] = []
  const sink = new Writable({
    write(chunk, _, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line))
      done()
    },
  })
  const dataDir = await mkdtemp(join(tmpdir(), 'osd-trgm-'))
  const config = loadConfig(
    { port: 0, host: '127.0.0.1', role: 'api', dataDir },
    { DATABASE_URL: databaseUrl },
  )
  try {
    const running = await startDaemon(config, pino({ level: 'info' }, sink))
    await running.stop()
  } finally {
    await rm(dataDir, { recursive: true, force: true })
  }
  return lines.filter((l) => JSON.stringify(l).includes('pg_trgm'))
}

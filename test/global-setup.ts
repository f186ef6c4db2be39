import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import type { TestProject } from 'vitest/node'
import { useEmbeddedServer } from '../server/db/embedded.js'
import { migrate } from '../server/db/migrate.js'
import { loadServiceCatalog } from '../server/domain/catalog/index.js'
import { createSql } from '../server/db/sql.js'

declare module 'vitest' {
  export interface ProvidedContext {
    adminUrl: string
    templateDb: string
  }
}

const quiet = { info: () => undefined, warn: () => undefined }

/** The run's one server and template, and how to take them down (prepare). */
interface Prepared {
  adminUrl: string
  templateDb: string
  teardown: () => Promise<void>
}

/**
 * Shared by the projects of vitest.config.ts: each project runs the global set-up, in the one main
 * process, so the first makes the server and the template and the last teardown removes them. (Each
 * made its own before: two servers and two migrated templates a run.)
 */
const sharedKey = Symbol.for('osd.test.globalSetup')
type Shared = { ready: Promise<Prepared>; users: number }

export default async function setup(project: TestProject) {
  const holder = globalThis as { [sharedKey]?: Shared }
  const shared = (holder[sharedKey] ??= { ready: prepare(), users: 0 })
  shared.users++
  const { adminUrl, templateDb, teardown } = await shared.ready
  project.provide('adminUrl', adminUrl)
  project.provide('templateDb', templateDb)
  return async () => {
    if (--shared.users > 0) return
    delete holder[sharedKey]
    await teardown()
  }
}

/**
 * One PostgreSQL for the whole run: OSD_TEST_DATABASE_URL (a maintenance database of a server the
 * tests may create databases on) or an embedded server in a temporary directory. Migrations are applied
 * once, to a template that every test file clones (graphile-worker's helpers).
 */
async function prepare(): Promise<Prepared> {
  let adminUrl = process.env.OSD_TEST_DATABASE_URL
  let dir: string | undefined
  let stop: (() => Promise<void>) | undefined
  if (!adminUrl) {
    dir = await mkdtemp(join(tmpdir(), 'osd-test-'))
    const server = await useEmbeddedServer(dir, quiet)
    adminUrl = server.adminUrl
    stop = server.stop
  }
  const templateDb = `osd_template_${process.pid}`
  const admin = postgres(adminUrl, { max: 1, onnotice: () => undefined })
  // The suite's own server, thrown away after the run, need not survive a crash of the machine: without
  // fsync, the immediate checkpoint each DROP DATABASE takes (one a test file) writes to the page cache
  // instead of waiting on the disk, and commits do not wait for it either. Routes and domain ran 8%
  // faster. synchronous_commit keeps its default: db/sql.test.ts holds osd's own use of it. The tests
  // that crash a database or osd use servers of their own, which keep every default.
  if (dir) {
    for (const setting of ['fsync', 'full_page_writes'])
      await admin.unsafe(`alter system set ${setting} = off`)
    await admin`select pg_reload_conf()`
  }
  await admin.unsafe(`drop database if exists "${templateDb}"`)
  await admin.unsafe(`create database "${templateDb}"`)
  const template = createSql(withDatabase(adminUrl, templateDb), { max: 1 })
  await migrate(template)
  // The service's catalogue, as osd serve loads it at start (DESIGN 12).
  await loadServiceCatalog(template)
  await template.end()

  const teardown = async () => {
    await admin.unsafe(`drop database if exists "${templateDb}" with (force)`)
    await admin.end()
    await stop?.()
    if (dir) await rm(dir, { recursive: true, force: true })
    // The run's own temporary directory on tmpfs (vitest.config.ts), with whatever a test left in it.
    const suiteDir = process.env.OSD_SUITE_TMPDIR
    if (suiteDir) await rm(suiteDir, { recursive: true, force: true })
  }
  return { adminUrl, templateDb, teardown }
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

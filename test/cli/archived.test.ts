import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { createMember } from '../../server/domain/org/index.js'
import { retentionPass } from '../../server/domain/retention/index.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'

// A run, chat or execution the retention pass archived (issue 46), through osctl in process against a
// real daemon: named by the first characters of its id as a live one is (issue 51), though no list
// shows it, and its detail view says it is archived.

let cli: CliDaemon
let runId = ''
let chatId = ''

beforeAll(async () => {
  const archiveDir = await mkdtemp(join(tmpdir(), 'osd-archive-'))
  // The test runs the pass itself.
  cli = await startCliDaemon('Archive Co', { OSD_ARCHIVE_DIR: archiveDir, OSD_RETENTION: 'off' })
  const task = await cli.json([
    'tasks',
    'create',
    '--name',
    'Nightly',
    '--kind',
    'deterministic',
    '--role',
    'ceo',
  ])
  runId = (await cli.json(['runs', 'start', task.slug, '--wait'])).id
  const { sql } = cli.db
  const enterpriseId = cli.enterprise.id
  const member = await createMember(sql, enterpriseId, { name: 'Ada' }, 'osd.local')
  const [chat] = await sql<{ id: string }[]>`
    insert into chats (enterprise_id, member_id, last_message_at)
    values (${enterpriseId}, ${member.id}, now()) returning id`
  chatId = chat!.id
  await sql`update chats set status = 'closed' where id = ${chatId}`
  // Past both windows (90 and 180 days), then moved out.
  await sql`
    update runs set created_at = created_at - interval '200 days',
                    finished_at = finished_at - interval '200 days'
     where enterprise_id = ${enterpriseId}`
  await sql`update chats set closed_at = closed_at - interval '200 days' where id = ${chatId}`
  await retentionPass(sql, { archiveDir, enterpriseId })
  const [left] = await sql<{ n: number }[]>`
    select (select count(*) from runs where id = ${runId})
         + (select count(*) from chats where id = ${chatId}) as n`
  expect(Number(left!.n)).toBe(0)
})

describe('an archived run, chat or execution', () => {
  it('is named by its first characters, as a live one; the lists still show live ones only', async () => {
    const run = await cli.json(['runs', 'get', runId.slice(0, 8)])
    expect(run.run.id).toBe(runId)
    expect(run.archived).toBe(true)
    const chat = await cli.json(['chats', 'get', chatId.slice(0, 8)])
    expect(chat.id).toBe(chatId)
    expect(chat.archived).toBe(true)
    // An execution's id is its first run's.
    const execution = await cli.json(['executions', 'get', runId.slice(0, 10)])
    expect(execution.execution.id).toBe(runId)
    expect(execution.archived).toBe(true)

    expect((await cli.json(['runs', 'list'])).data).toEqual([])
    expect(await cli.json(['chats', 'list'])).toEqual([])
    // A prefix nothing starts with is the daemon's not found, as before.
    const none = await osctl(['runs', 'get', 'ffffffff'], cli.env)
    expect(none.exitCode).not.toBe(0)
    expect(none.stderr).toContain('run_not_found')
  })

  it('says so in the detail views', async () => {
    const run = await osctl(['runs', 'get', runId.slice(0, 8)], cli.env)
    expect(run.exitCode, run.stderr).toBe(0)
    expect(run.stdout).toMatch(
      /^archived +yes: read back from the archive; in no list, and not to fork or retry$/m,
    )
    const chat = await osctl(['chats', 'get', chatId.slice(0, 8)], cli.env)
    expect(chat.exitCode, chat.stderr).toBe(0)
    expect(chat.stdout).toMatch(/^archived +yes: read back from the archive; in no list$/m)
    const execution = await osctl(['executions', 'get', runId], cli.env)
    expect(execution.exitCode, execution.stderr).toBe(0)
    expect(execution.stdout.split('\n')[0]).toMatch(/\(archived\)$/)
  })
})

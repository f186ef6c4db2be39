import { randomBytes } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { createMember } from '../../server/domain/org/index.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'

// A run, gate, chat or execution named by the first characters of its id, as git names an object
// (issue 51 item 8), in process against a real daemon: one match is used, none is the daemon's own
// not found, several exit 2 listing them, fewer than 8 characters exit 2. (Tokens: people.test.ts.)

let cli: CliDaemon
const prefix = randomBytes(4).toString('hex')
/** The n-th id that starts with the prefix; its first 13 characters are its own. */
const idOf = (n: number) => `${prefix}-000${n}-4000-8000-000000000000`
const own = (n: number) => idOf(n).slice(0, 13)
let runId = ''

beforeAll(async () => {
  cli = await startCliDaemon('Prefix Co')
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
  const run = await cli.json(['runs', 'start', task.slug, '--wait'])
  runId = run.id
  const { sql } = cli.db
  const enterpriseId = cli.enterprise.id
  // Three more runs (so executions) whose ids share the prefix.
  for (const n of [1, 2, 3])
    await sql`
      insert into runs
      select copy.* from runs r,
             jsonb_populate_record(null::runs, to_jsonb(r) || ${sql.json({
               id: idOf(n),
               execution_id: idOf(n),
               lane: `prefix-${n}`,
             } as never)}) copy
       where r.id = ${run.id}`
  const member = await createMember(sql, enterpriseId, { name: 'Ada' }, 'osd.local')
  for (const n of [1, 2]) {
    await sql`insert into gates (id, enterprise_id, kind, tool, summary)
              values (${idOf(n)}, ${enterpriseId}, 'question', 'os.ask_ceo', 'Ship it?')`
    await sql`insert into chats (id, enterprise_id, member_id, last_message_at)
              values (${idOf(n)}, ${enterpriseId}, ${member.id}, now())`
  }
})

describe('an id prefix', () => {
  it('names the one run, gate, chat or execution it starts', async () => {
    const run = await cli.json(['runs', 'get', runId.slice(0, 8)])
    expect(run.run.id).toBe(runId)
    const watched = await osctl(['runs', 'wait', runId.slice(0, 13)], cli.env)
    expect(watched.exitCode, watched.stderr).toBe(0)
    expect((await cli.json(['runs', 'get', own(3).replace(/-/g, '')])).run.id).toBe(idOf(3))
    expect((await cli.json(['gates', 'get', idOf(2)])).id).toBe(idOf(2))
    expect((await cli.json(['gates', 'get', own(2)])).id).toBe(idOf(2))
    expect((await cli.json(['chats', 'get', own(1)])).id).toBe(idOf(1))
    const execution = await cli.json(['executions', 'get', own(3)])
    expect(execution.execution.id).toBe(idOf(3))
    expect((await cli.json(['executions', 'get', runId.slice(0, 10)])).execution.id).toBe(runId)
    // A decided gate is found as a waiting one is.
    await cli.db.sql`update gates set status = 'decided', decided_at = now() where id = ${idOf(1)}`
    expect((await cli.json(['gates', 'get', own(1)])).status).toBe('decided')
  })

  it('several matches: exit 2 listing them', async () => {
    const res = await osctl(['runs', 'get', prefix], cli.env)
    expect(res.exitCode).toBe(2)
    expect(res.stdout).toBe('')
    const lines = res.stderr.trimEnd().split('\n')
    expect(lines[0]).toBe(`error: ambiguous run prefix ${prefix}: matches 3 runs`)
    expect(
      lines
        .slice(1)
        .map((l) => l.trim().split(/\s+/)[0])
        .sort(),
    ).toEqual([idOf(1), idOf(2), idOf(3)])
    expect(lines[1]).toMatch(/^ {2}\S+ {2}nightly succeeded {2}\d{4}-\d\d-\d\dT/)
    const gates = await osctl(['gates', 'approve', prefix], cli.env)
    expect(gates.exitCode).toBe(2)
    expect(gates.stderr).toMatch(
      new RegExp(`^error: ambiguous gate prefix ${prefix}: matches 2 gates\n`),
    )
    const chats = await osctl(['chats', 'stop', prefix, '--json'], cli.env)
    expect(chats.exitCode).toBe(2)
    expect(JSON.parse(chats.stdout)).toMatchObject({
      error: 'usage',
      message: expect.stringMatching(`^ambiguous chat prefix ${prefix}: matches 2 chats\n`),
    })
    // Nothing was decided or stopped.
    const [gate] = await cli.db.sql<{ status: string }[]>`
      select status from gates where id = ${idOf(2)}`
    expect(gate!.status).toBe('waiting')
  })

  it('no match: the not found the whole id would get; fewer than 8 characters: exit 2', async () => {
    const none = `${prefix}-ffff`
    const missing = await osctl(['runs', 'get', none], cli.env)
    expect(missing.exitCode).toBe(1)
    expect(missing.stderr).toMatch(/^error: run_not_found: /)
    const whole = await osctl(['runs', 'get', `${prefix}-ffff-4000-8000-000000000000`], cli.env)
    expect(whole.stderr.split(':').slice(0, 2)).toEqual(missing.stderr.split(':').slice(0, 2))
    expect((await osctl(['chats', 'get', none], cli.env)).stderr).toMatch(
      /^error: chat_not_found: /,
    )
    const short = await osctl(['runs', 'get', prefix.slice(0, 7)], cli.env)
    expect(short.exitCode).toBe(2)
    expect(short.stderr).toBe(
      `error: a run is named by its id or its first 8 or more characters; "${prefix.slice(0, 7)}" has 7\n`,
    )
    const dashed = await osctl(
      ['gates', 'get', `${prefix.slice(0, 4)}-${prefix.slice(4)}`],
      cli.env,
    )
    expect(dashed.exitCode).toBe(2)
    expect(dashed.stderr).toMatch(/its dashes fall where an id has none/)
    const word = await osctl(['wait', 'gate', 'nightly', '--for', 'decided'], cli.env)
    expect(word.exitCode).toBe(2)
    expect(word.stderr).toBe(
      'error: a gate is named by its id or its first 8 or more characters; got "nightly"\n',
    )
  })
})

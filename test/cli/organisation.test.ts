import { mkdtemp, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { drawTree } from '../../cli/tree.js'
import type { TestDatabase } from '../helpers/db.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'

// osctl teams, members, roles and org against a real daemon, osctl in process (issue 28).

let db: TestDatabase
let env: Record<string, string>
let enterpriseId: string
let json: CliDaemon['json']

beforeAll(async () => {
  const cli = await startCliDaemon('Org Cli')
  db = cli.db
  env = cli.env
  enterpriseId = cli.enterprise.id
  json = cli.json
})

describe('osctl teams, members, roles', () => {
  it('creates, finds by slug or email, changes and deletes', async () => {
    const team = await json([
      'teams',
      'create',
      '--name',
      'Platform',
      '--charter',
      'Lights on',
      '--limit',
      '3',
    ])
    expect(team).toMatchObject({ slug: 'platform', charter: 'Lights on', concurrentRunLimit: 3 })
    const ada = await json(['members', 'create', '--name', 'Ada', '--persona', 'Careful'])
    expect(ada.email).toBe('ada@org-cli.osd.local')

    const updated = await json([
      'teams',
      'update',
      'platform',
      '--lead',
      'ada@org-cli.osd.local',
      '--limit',
      'none',
    ])
    expect(updated).toMatchObject({ leadMemberId: ada.id, concurrentRunLimit: null })
    const role = await json(['roles', 'create', '--name', 'Reviewer', '--team', 'platform'])
    expect(role.role).toMatchObject({ slug: 'reviewer', teamId: team.id })

    const joined = await json(['teams', 'add-member', 'platform', 'Ada', '--role', 'reviewer'])
    expect(joined.members.map((m: { id: string }) => m.id)).toEqual([ada.id])
    expect(
      (await json(['members', 'get', ada.id])).roles.map((r: { slug: string }) => r.slug),
    ).toEqual(['reviewer'])

    const list = await osctl(['teams', 'list'], env)
    expect(list.stdout).toMatch(/SLUG\s+NAME\s+MEMBERS/)
    expect(list.stdout).toMatch(/platform\s+Platform\s+1/)

    expect(
      (await osctl(['teams', 'remove-member', 'platform', 'Ada', '--yes'], env)).exitCode,
    ).toBe(0)
    expect((await json(['members', 'get', 'Ada'])).roles).toEqual([])
    expect((await osctl(['teams', 'delete', 'platform'], env)).exitCode).toBe(2) // needs --yes off a terminal
    expect((await osctl(['teams', 'delete', 'platform', '--yes'], env)).exitCode).toBe(0)
    expect((await osctl(['teams', 'get', 'platform'], env)).stderr).toContain('no team "platform"')
  })

  it('grants and revokes roles from either side, and assigns tasks to roles', async () => {
    await json(['members', 'create', '--name', 'Grace'])
    await json(['roles', 'create', '--name', 'Deployer'])
    expect(
      (await json(['roles', 'grant', 'deployer', 'Grace'])).holders.map(
        (m: { name: string }) => m.name,
      ),
    ).toEqual(['Grace'])
    expect((await osctl(['roles', 'revoke', 'deployer', 'Grace'], env)).exitCode).toBe(0)
    expect(
      (await json(['members', 'grant', 'Grace', 'deployer'])).roles.map(
        (r: { slug: string }) => r.slug,
      ),
    ).toEqual(['deployer'])
    expect((await osctl(['members', 'revoke', 'Grace', 'deployer'], env)).exitCode).toBe(0)

    const [task] = await db.sql<{ id: string }[]>`
      insert into tasks (enterprise_id, slug, name) values (${enterpriseId}, 'ship-it', 'Ship it') returning id`
    const assigned = await json(['roles', 'assign-task', 'deployer', task!.id])
    expect(assigned.tasks.map((t: { slug: string }) => t.slug)).toEqual(['ship-it'])
    expect((await osctl(['roles', 'unassign-task', 'deployer', task!.id], env)).exitCode).toBe(0)
    expect((await osctl(['roles', 'delete', 'ceo', '--yes'], env)).stderr).toContain('role_builtin')
  })

  it('sets, saves and clears a picture, and updates and removes a member', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'osctl-avatar-'))
    const png = Buffer.from(
      'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
      'base64',
    )
    await writeFile(join(dir, 'in.png'), png)
    await json(['members', 'create', '--name', 'Pic Person'])
    expect(
      (await osctl(['members', 'avatar', 'set', 'Pic Person', join(dir, 'in.png')], env)).exitCode,
    ).toBe(0)
    expect(
      (await osctl(['members', 'avatar', 'get', 'Pic Person', '-o', join(dir, 'out.png')], env))
        .exitCode,
    ).toBe(0)
    expect((await readFile(join(dir, 'out.png'))).equals(png)).toBe(true)
    expect((await osctl(['members', 'avatar', 'clear', 'Pic Person', '--yes'], env)).exitCode).toBe(
      0,
    )
    const missing = await osctl(
      ['members', 'avatar', 'get', 'Pic Person', '-o', join(dir, 'x.png')],
      env,
    )
    expect(missing.exitCode).toBe(1)
    expect(missing.stderr).toContain('avatar_not_found')

    const changed = await json([
      'members',
      'update',
      'Pic Person',
      '--persona',
      'Quiet',
      '--email',
      'pic@example.com',
    ])
    expect(changed).toMatchObject({ persona: 'Quiet', email: 'pic@example.com' })
    expect((await osctl(['members', 'delete', 'pic@example.com', '--yes'], env)).exitCode).toBe(0)
    const list = await json(['members', 'list'])
    expect(list.some((m: { email: string }) => m.email === 'pic@example.com')).toBe(false)
  })

  it('refuses a member name the API refuses, with its code', async () => {
    const res = await osctl(['members', 'create', '--name', '!!!'], env)
    expect(res.exitCode).toBe(1)
    expect(res.stderr).toMatch(/^error: invalid_name: .* \(400\)$/m)
  })
})

describe('osctl org', () => {
  it('draws the organisation as a tree, and answers JSON with --json', async () => {
    const res = await osctl(['org'], env)
    expect(res.exitCode).toBe(0)
    expect(res.stdout).toMatch(/^General \(general\)$/m)
    expect(res.stdout).toMatch(/├── Chief Executive <chief-executive@org-cli\.osd\.local>/)
    expect(res.stdout).toMatch(/│   └── ceo \(enterprise-wide\)/)
    const tree = await json(['org'])
    expect(tree.teams[0].slug).toBeDefined()
  })
})

describe('drawTree', () => {
  it('draws branches and keeps the trunk of unfinished levels', () => {
    expect(
      drawTree([
        {
          label: 'root',
          children: [
            { label: 'a', children: [{ label: 'a1' }] },
            { label: 'b', children: [{ label: 'b1' }] },
          ],
        },
      ]),
    ).toEqual(['root', '├── a', '│   └── a1', '└── b', '    └── b1'])
  })
})

import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { filesOf, unifiedDiff } from '../../cli/config-files.js'
import { exitCodes } from '../../cli/errors.js'
import { createUser, setMembership } from '../../server/domain/people/index.js'
import { createTestEnterprise, type TestEnterprise } from '../helpers/app.js'
import { everyKindSecrets, makeEveryKind, type Api } from '../helpers/config.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'

// osctl config export, diff -f and apply -f (issue 48) against a real daemon, osctl in process: the
// files, the lines printed and kubectl's exit codes (diff: 0 nothing would change, 1 something would,
// more on an error).

let cli: CliDaemon
let copy: TestEnterprise
/** osctl's environment acting as the chief executive of the copy (who alone binds enterprise tools). */
let copyEnv: Record<string, string>
let sourceDir: string

const apiOf =
  (token: string): Api =>
  async (method, path, body) => {
    const res = await fetch(`${cli.daemon.url}${path.replace(/^\/v1/, '')}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await res.text()
    return { status: res.status, body: text ? JSON.parse(text) : undefined }
  }

/** A signed-in owner of `enterprise`: its session secret, used as osctl's token. */
async function ceoOf(enterprise: TestEnterprise): Promise<string> {
  const email = `ceo-${randomBytes(4).toString('hex')}@example.com`
  const password = `pw-${randomBytes(9).toString('base64url')}`
  const user = await createUser(cli.db.sql, { email, password, name: 'A ceo' })
  await setMembership(cli.db.sql, enterprise.id, user.id, 'owner')
  const res = await fetch(`${cli.daemon.url}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password, enterprise: enterprise.slug }),
  })
  expect(res.status).toBe(200)
  return ((await res.json()) as { sessionToken: string }).sessionToken
}

/** Every file under `dir` with its bytes, by path relative to it. */
async function filesIn(dir: string): Promise<Record<string, string>> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  const out: Record<string, string> = {}
  for (const e of entries.filter((e) => e.isFile()).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const full = join(e.parentPath, e.name)
    out[relative(dir, full)] = await readFile(full, 'utf8')
  }
  return out
}

const tempDir = () => mkdtemp(join(tmpdir(), 'osctl-config-'))

beforeAll(async () => {
  cli = await startCliDaemon('Config Cli')
  const ceo = await ceoOf(cli.enterprise)
  await makeEveryKind(apiOf(cli.enterprise.token), apiOf(ceo))
  copy = await createTestEnterprise(cli.db.sql, `Config Copy ${randomBytes(3).toString('hex')}`, {
    mailDomain: 'osd.local',
  })
  copyEnv = { ...cli.env, OSCTL_TOKEN: await ceoOf(copy), ...everyKindSecrets }
  sourceDir = await tempDir()
  const exported = await osctl(['config', 'export', sourceDir], cli.env)
  expect(exported.exitCode, exported.stderr).toBe(0)
}, 120_000)

describe('osctl config export', () => {
  it('writes one file per object in a stable layout, never a secret', async () => {
    const files = await filesIn(sourceDir)
    expect(Object.keys(files)).toEqual(
      expect.arrayContaining([
        'settings.yaml',
        'teams/engineering.yaml',
        'roles/engineering/reviewer.yaml',
        'roles/writer.yaml',
        'members/ada-lovelace.yaml',
        'tasks/weekly-report.yaml',
        'tools/vcs.yaml',
        'tools/team-engineering/docs.yaml',
        'model-keys/provider_a.yaml',
        'model-tiers.yaml',
        'spend-limits.yaml',
      ]),
    )
    expect(files['tasks/weekly-report.yaml']).toMatch(
      /^apiVersion: osd\/v1\nkind: Task\nmetadata:\n {2}name: weekly-report\nspec:\n/,
    )
    const all = Object.values(files).join('\n')
    for (const secret of Object.values(everyKindSecrets)) expect(all).not.toContain(secret)
    expect(files['tools/vcs.yaml']).toContain('tokenFrom: env:OSD_TOOL_VCS_TOKEN')
  })

  it('writes the same bytes twice, and removes the files of objects gone, not other files', async () => {
    const dir = await tempDir()
    await osctl(['config', 'export', dir], cli.env)
    const first = await filesIn(dir)
    await writeFile(
      join(dir, 'tasks', 'gone.yaml'),
      'apiVersion: osd/v1\nkind: Task\nmetadata:\n  name: gone\nspec:\n  name: Gone\n',
    )
    await writeFile(join(dir, 'README.yaml'), 'not: ours\n')
    const again = await osctl(['config', 'export', dir], cli.env)
    expect(again.exitCode, again.stderr).toBe(0)
    expect(again.stdout).toMatch(/^\d+ objects written to /)
    expect(await filesIn(dir)).toEqual({ ...first, 'README.yaml': 'not: ours\n' })
  })
})

describe('the issue: export, apply to a second enterprise, export again', () => {
  it('gives byte-identical files; applying again is every object unchanged, exit 0', async () => {
    const first = await osctl(['apply', '-f', sourceDir], copyEnv)
    expect(first.exitCode, first.stderr).toBe(0)
    expect(first.stdout).toContain('task/weekly-report created\n')
    expect(first.stdout).toContain('toolconnection/docs (team/engineering) created\n')

    const copyDir = await tempDir()
    const exported = await osctl(['config', 'export', copyDir], copyEnv)
    expect(exported.exitCode, exported.stderr).toBe(0)
    expect(await filesIn(copyDir)).toEqual(await filesIn(sourceDir))

    const second = await osctl(['apply', '-f', sourceDir], copyEnv)
    expect(second.exitCode, second.stderr).toBe(0)
    const lines = second.stdout.trim().split('\n')
    expect(lines.length).toBe(Object.keys(await filesIn(sourceDir)).length)
    for (const line of lines) expect(line).toMatch(/ unchanged$/)

    const diff = await osctl(['diff', '-f', sourceDir], copyEnv)
    expect(diff).toMatchObject({ exitCode: 0, stdout: '' })
  })
})

describe('a change of a task in a file', () => {
  it('diff exits 1 naming the task, apply makes a new version, diff exits 0 again', async () => {
    const dir = await tempDir()
    await osctl(['config', 'export', dir], cli.env)
    const file = join(dir, 'tasks', 'weekly-report.yaml')
    const text = await readFile(file, 'utf8')
    await writeFile(file, text.replace('goal: Tell the week.', 'goal: Tell the week, briefly.'))

    const diff = await osctl(['diff', '-f', dir], cli.env)
    expect(diff.exitCode, diff.stderr).toBe(1)
    expect(diff.stderr).toBe('')
    expect(diff.stdout).toContain(
      '--- live/task/weekly-report\n+++ desired/task/weekly-report\n@@ ',
    )
    expect(diff.stdout).toContain('\n-  goal: Tell the week.\n+  goal: Tell the week, briefly.\n')
    expect(diff.stdout).not.toContain('team/')

    const apply = await osctl(['apply', '-f', dir], cli.env)
    expect(apply.exitCode, apply.stderr).toBe(0)
    expect(apply.stdout).toContain('task/weekly-report configured\n')
    expect(apply.stdout).toContain('team/engineering unchanged\n')
    const task = await cli.json(['tasks', 'get', 'weekly-report'])
    expect(task.currentVersion.definition.goal).toBe('Tell the week, briefly.')
    expect(task.versions[0]).toMatchObject({ message: 'applied from config', current: true })

    expect((await osctl(['diff', '-f', dir], cli.env)).exitCode).toBe(0)
  })

  it('apply --dry-run says what it would do and does none of it', async () => {
    const dir = await tempDir()
    await osctl(['config', 'export', dir], cli.env)
    await writeFile(
      join(dir, 'teams', 'research.yaml'),
      'apiVersion: osd/v1\nkind: Team\nmetadata:\n  name: research\nspec:\n  name: Research\n',
    )
    const dry = await osctl(
      ['apply', '-f', join(dir, 'teams', 'research.yaml'), '--dry-run'],
      cli.env,
    )
    expect(dry).toMatchObject({ exitCode: 0, stdout: 'team/research created (dry run)\n' })
    const diff = await osctl(['diff', '-f', dir], cli.env)
    expect(diff.exitCode).toBe(1)
    expect(diff.stdout).toContain('--- /dev/null\n+++ desired/team/research\n')
  })
})

describe('an invalid document beside a valid change', () => {
  it('exits more than 0 naming the document and its file; nothing is changed', async () => {
    const dir = await tempDir()
    await osctl(['config', 'export', dir], cli.env)
    const before = await cli.json(['config', 'export', await tempDir()])
    const file = join(dir, 'tasks', 'publish.yaml')
    await writeFile(
      file,
      (await readFile(file, 'utf8')).replace('name: Publish', 'name: Publish it'),
    )
    const bad = join(dir, 'teams', 'operations.yaml')
    await writeFile(bad, (await readFile(bad, 'utf8')) + '  colour: blue\n')

    const apply = await osctl(['apply', '-f', dir], cli.env)
    expect(apply.exitCode).toBe(exitCodes.failed)
    expect(apply.stderr).toMatch(
      /^error: config_document_invalid: documents\[\d+\] \(Team operations\): spec\.colour: unknown field \(400\)\nhint: documents\[\d+\] is .*teams\/operations\.yaml\n$/,
    )
    const diff = await osctl(['diff', '-f', dir], cli.env)
    expect(diff.exitCode).toBe(exitCodes.unreachable)
    expect(diff.stdout).toBe('')

    const after = await cli.json(['config', 'export', await tempDir()])
    expect(after.base).toBe(before.base)
  })

  it('a file that is not YAML: exit 2 naming the file and line, nothing sent', async () => {
    const dir = await tempDir()
    await mkdir(join(dir, 'teams'))
    await writeFile(join(dir, 'teams', 'x.yaml'), 'apiVersion: osd/v1\nkind: [Team\n')
    for (const verb of ['apply', 'diff']) {
      const res = await osctl([verb, '-f', dir], cli.env)
      expect(res.exitCode).toBe(exitCodes.usage)
      expect(res.stderr).toMatch(/^error: .*teams\/x\.yaml:\d+: not YAML: /)
    }
    await rm(dir, { recursive: true })
  })

  it('a file yaml cannot turn into values (an alias bomb): exit 2 naming the file, nothing sent', async () => {
    const dir = await tempDir()
    const file = join(dir, 'bomb.yaml')
    const names = 'abcdefghi'
    const lines = [`a: &a [${Array(9).fill(1).join(',')}]`]
    for (let i = 1; i < names.length; i++)
      lines.push(
        `${names[i]}: &${names[i]} [${Array(9)
          .fill(`*${names[i - 1]}`)
          .join(',')}]`,
      )
    await writeFile(file, lines.join('\n') + '\n')
    for (const verb of ['apply', 'diff']) {
      const res = await osctl([verb, '-f', file], cli.env)
      expect(res.exitCode, res.stderr).toBe(exitCodes.usage)
      expect(res.stderr).toMatch(
        /^error: .*bomb\.yaml: YAML osctl cannot read: Excessive alias count/,
      )
      expect(res.stderr).not.toContain('    at ')
    }
  })

  it("diff turns a failure that is not osctl's own into exit 3, never 1", async () => {
    const { diff } = await import('../../cli/commands/config.js')
    const dir = await tempDir()
    await writeFile(join(dir, 'team.yaml'), 'apiVersion: osd/v1\nkind: Team\n')
    const deps = {
      stdin: async () => '',
      client: () => {
        throw new TypeError('a bug')
      },
    } as unknown as Parameters<typeof diff>[0]
    const err = await diff(deps, { file: dir }).catch((e: unknown) => e)
    expect(err).toMatchObject({ exitCode: exitCodes.unreachable })
    expect((err as Error).message).toContain('TypeError: a bug')
  })

  it('config export to a path that is a file: a clear error naming it', async () => {
    const file = join(await tempDir(), 'not-a-dir')
    await writeFile(file, 'x')
    const res = await osctl(['config', 'export', file], cli.env)
    expect(res.exitCode).toBe(exitCodes.usage)
    expect(res.stderr).toBe(`error: cannot export to ${file}: it is not a directory\n`)
    expect(await readFile(file, 'utf8')).toBe('x')
  })

  it('bad credentials: diff exits 4, more than 1', async () => {
    const env = { ...cli.env, OSCTL_TOKEN: 'osd_not_a_token' }
    expect((await osctl(['diff', '-f', sourceDir], env)).exitCode).toBe(exitCodes.auth)
  })
})

describe('secrets', () => {
  it('are read from the environment: a changed one is a change, an unset one is none', async () => {
    const changed = { ...copyEnv, OSD_TOOL_VCS_TOKEN: 'vcs-token-2' }
    const diff = await osctl(['diff', '-f', join(sourceDir, 'tools', 'vcs.yaml')], changed)
    expect(diff.exitCode, diff.stderr).toBe(1)
    expect(diff.stdout).toBe(
      '--- live/toolconnection/vcs\n+++ desired/toolconnection/vcs\n# spec.tokenFrom (value): (from env:OSD_TOOL_VCS_TOKEN)\n',
    )
    expect(diff.stdout).not.toContain('vcs-token')
    const unset = { ...copyEnv, OSD_TOOL_VCS_TOKEN: undefined } as unknown as Record<string, string>
    expect(
      (await osctl(['diff', '-f', join(sourceDir, 'tools', 'vcs.yaml')], unset)).exitCode,
    ).toBe(0)
  })
})

describe('files and diffs (units)', () => {
  it('never names a file outside the directory, whatever an object is called', () => {
    const doc = (kind: string, name: string, layer?: string) => ({
      apiVersion: 'osd/v1' as const,
      kind: kind as 'Member',
      metadata: layer ? { name, layer } : { name },
      spec: {},
    })
    expect(
      filesOf([
        doc('Member', '../../etc/passwd'),
        doc('Member', '.. ..'),
        doc('Member', 'Zoë Ann'),
        doc('Member', 'zoe ann'),
        doc('ToolConnection', 'x', 'member/Ada L'),
      ]),
    ).toEqual([
      'members/etc-passwd.yaml',
      'members/object.yaml',
      'members/zoe-ann.yaml',
      'members/zoe-ann-2.yaml',
      'tools/member-ada-l/x.yaml',
    ])
  })

  it('diffs by line with three lines of context', () => {
    const a = 'a\nb\nc\nd\ne\nf\ng\nh\n'
    const b = 'a\nb\nc\nd\nE\nf\ng\nh\n'
    expect(unifiedDiff(a, b)).toBe('@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n')
    expect(unifiedDiff('', 'x\n')).toBe('@@ -0,0 +1,1 @@\n+x\n')
    expect(unifiedDiff(a, a)).toBe('')
  })
})

describe('--jq', () => {
  it("filters the JSON a command prints with jq's own semantics, strings raw", async () => {
    const dir = await tempDir()
    const tasks = await osctl(
      [
        'config',
        'export',
        dir,
        '--jq',
        '[.files[] | select(startswith("tasks/"))] | sort | join(",")',
      ],
      cli.env,
    )
    expect(tasks).toMatchObject({
      exitCode: 0,
      stdout: 'tasks/publish.yaml,tasks/weekly-report.yaml\n',
    })
    const file = join(dir, 'teams', 'operations.yaml')
    await writeFile(file, (await readFile(file, 'utf8')).replace('name: Operations', 'name: Ops'))
    const changed = await osctl(
      [
        '--jq',
        '.changes[] | select(.action == "update") | "\\(.name) \\(.fields[0].path)"',
        'diff',
        '-f',
        dir,
      ],
      cli.env,
    )
    // The command's own exit code stays: 1, something would change.
    expect(changed).toMatchObject({ exitCode: 1, stdout: 'operations spec.name\n' })
  })

  it('a filter jq refuses: exit 2 with its words', async () => {
    const res = await osctl(['config', 'export', await tempDir(), '--jq', '.files |||'], cli.env)
    expect(res.exitCode).toBe(exitCodes.usage)
    expect(res.stderr).toMatch(/^error: --jq: jq: error: syntax error/)
  })

  it('a filter that does not compile: exit 2 before the command does anything', async () => {
    const file = join(await tempDir(), 'team.yaml')
    await writeFile(
      file,
      'apiVersion: osd/v1\nkind: Team\nmetadata:\n  name: not-made\nspec:\n  name: Not made\n',
    )
    const res = await osctl(['apply', '-f', file, '--jq', '.['], cli.env)
    expect(res).toMatchObject({ exitCode: exitCodes.usage, stdout: '' })
    expect(res.stderr).toMatch(/^error: --jq: jq: error: syntax error, unexpected end of file/)
    const teams: { slug: string }[] = await cli.json(['teams', 'list'])
    expect(teams.map((t) => t.slug)).not.toContain('not-made')
  })

  it('a filter that fails on the data: what jq printed first, then exit 2 with its words', async () => {
    // jq-wasm as installed printed the results before the failure and exit 0 (cli/jq-runtime.ts).
    const res = await osctl(
      ['config', 'export', await tempDir(), '--jq', '(.files | length), (.files[] | .x)'],
      cli.env,
    )
    expect(res.stdout).toMatch(/^\d+\n$/)
    expect(res.exitCode).toBe(exitCodes.usage)
    expect(res.stderr).toMatch(
      /^error: --jq: jq: error \(at .*\): Cannot index string with (string )?"x"/,
    )
  })
})

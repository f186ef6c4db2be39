import type { Command } from 'commander'
import { describe, expect, it } from 'vitest'
import { about } from '../../cli/commands/about.js'
import { buildProgram, topLevelCommands } from '../../cli/program.js'
import { report } from '../../cli/report.js'

const noDeps = () => {
  throw new Error('no command runs in this test')
}

const program = await buildProgram(noDeps)

/** The tree cli/run.ts builds for `osctl ARGS`. */
const treeFor = (args: string[]) => buildProgram(noDeps, ['node', 'osctl', ...args])

/** Every command that does something (has no subcommands), by its full name. */
function leaves(command: Command, path: string[] = []): [string, Command][] {
  if (command.commands.length === 0) return [[path.join(' '), command]]
  return command.commands.flatMap((c) => leaves(c, [...path, c.name()]))
}

function help(command: Command): string {
  let text = ''
  command.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) })
  command.outputHelp()
  return text
}

/** The top-level commands of `tree` that are the real ones, not stubs: their help is the whole tree's. */
function loaded(tree: Command): string[] {
  return tree.commands
    .filter((c) => help(c) === help(program.commands.find((p) => p.name() === c.name())!))
    .map((c) => c.name())
}

/** `osctl ARGS` parsed by `tree`, as cli/run.ts parses it: exit code and what was printed. */
async function parse(tree: Command, args: string[]) {
  let stdout = ''
  let stderr = ''
  const io = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  }
  const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)]
  for (const c of all(tree))
    c.configureOutput({ writeOut: io.stdout.write, writeErr: io.stderr.write })
  let code = 0
  try {
    await tree.parseAsync(['node', 'osctl', ...args])
  } catch (err) {
    code = report(err, Boolean(tree.opts().json), io)
  }
  return { code, stdout, stderr }
}

describe('osctl --help', () => {
  it.each(leaves(program))('%s shows an example', (_name, command) => {
    expect(help(command)).toMatch(/\nExamples:\n {2}\$ .*osctl /)
  })
})

describe('the list of top-level commands (topLevelCommands)', () => {
  it('is what the modules register, in order: each term, and each line read from about.ts', async () => {
    // Each line swapped for a mark while the modules register: one that wrote its own text, even the
    // same words, shows here.
    const lines = { ...about }
    for (const name of Object.keys(about) as (keyof typeof about)[]) about[name] = `<${name}>`
    try {
      const whole = await buildProgram(noDeps)
      const helper = whole.createHelp()
      expect(
        whole.commands.map((c) => [helper.subcommandTerm(c), helper.subcommandDescription(c)]),
      ).toEqual(topLevelCommands.map((c) => [c.term ?? c.name, `<${c.name}>`]))
    } finally {
      Object.assign(about, lines)
    }
  })

  it.each(topLevelCommands.map((c) => c.name))(
    'osctl %s loads that command alone',
    async (name) => {
      const tree = await treeFor([name, '--help'])
      expect(loaded(tree)).toEqual(
        name === 'completion' ? topLevelCommands.map((c) => c.name) : [name],
      )
    },
  )
})

describe('the tree a command line loads', () => {
  it('has the named command whole and stubs for the others', async () => {
    const tree = await treeFor(['tasks', 'list'])
    const command = (name: string) => tree.commands.find((c) => c.name() === name)!
    expect(command('tasks').commands.map((c) => c.name())).toContain('improve')
    expect(command('runs').commands).toEqual([])
    expect(tree.commands.map((c) => c.name())).toEqual(topLevelCommands.map((c) => c.name))
  })

  it.each([
    [['--json', '--url', 'http://x/v1', 'tasks', 'list']],
    [['--url=http://x/v1', '--profile', 'ci', 'tasks']],
    [['--token', 'tasks', 'tasks', 'list']],
    [['--json', '--', 'tasks']],
    [['--help', 'tasks']],
    [['help', 'tasks']],
    [['--json', 'help', '--profile', 'ci', 'tasks']],
  ])('finds the command after the global options: osctl %j', async (args) => {
    expect(loaded(await treeFor(args))).toEqual(['tasks'])
  })

  it.each([
    [[]],
    [['--help']],
    [['help']],
    [['--json']],
    [['taks', 'list']],
    [['help', 'taks']],
    [['--url', 'tasks']],
  ])('loads no command for osctl %j', async (args) => {
    expect(loaded(await treeFor(args))).toEqual([])
  })

  it.each([
    [[]],
    [['--help']],
    [['help']],
    [['help', 'help']],
    [['taks', 'list']],
    [['memry']],
    [['help', 'taks']],
    [['--json', 'no-such-command']],
    [['--jsno', 'health']],
    [['--url']],
    [['--', '--help']],
    [['tasks', 'lst']],
    [['help', 'runs', 'start']],
    [['--help', 'runs']],
    [['webhook-secret', '--help']],
  ])('answers osctl %j as the whole tree does', async (args) => {
    const whole = await parse(await buildProgram(noDeps), args)
    expect(await parse(await treeFor(args), args)).toEqual(whole)
  })
})

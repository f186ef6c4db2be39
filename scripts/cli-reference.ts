// npm run docs:cli: writes docs/osctl.md, the reference of every osctl command, from the commander tree
// itself (cli/program.ts): each command's path, description, usage, arguments, options and examples.
// test/cli/reference.test.ts fails when the file is out of date.
import { mkdir } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Command, Help } from 'commander'
import prettier from 'prettier'
import { exitCodeTable, exitCodes } from '../cli/errors.js'
import { buildProgram } from '../cli/program.js'
import { projectRoot } from '../shared/paths.js'
import { writeGenerated } from './generated.js'

export const referenceFile = join(projectRoot, 'docs', 'osctl.md')

/** Text that markdown would otherwise read as markup: `<name>` as a tag, `*` as emphasis. */
function prose(text: string): string {
  return text.replace(/[\\<*]/g, (c) => `\\${c}`)
}

function fullName(command: Command): string {
  const names: string[] = []
  for (let c: Command | null = command; c; c = c.parent) names.unshift(c.name())
  return names.join(' ')
}

/** The lines `examples()` (cli/command.ts) adds to a command's --help, without their "$ ". */
function examplesOf(command: Command): string[] {
  let text = ''
  command.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) })
  command.outputHelp()
  return (text.split('\nExamples:\n')[1] ?? '')
    .split('\n')
    .map((line) => line.match(/^\s*\$ (.*)$/)?.[1])
    .filter((line): line is string => line !== undefined)
}

function optionLines(help: Help, command: Command): string[] {
  return help
    .visibleOptions(command)
    .filter((o) => o.long !== '--help')
    .map((o) => {
      const description = help.optionDescription(o) + (o.mandatory ? ' (required)' : '')
      return `- \`${help.optionTerm(o)}\`${description.trim() ? `: ${prose(description.trim())}` : ''}`
    })
}

function section(help: Help, command: Command, depth: number): string[] {
  const lines = [`${'#'.repeat(Math.min(depth + 1, 4))} ${fullName(command)}`, '']
  const description = help.commandDescription(command)
  if (description) lines.push(prose(description), '')
  const subcommands = help.visibleCommands(command).filter((c) => c.name() !== 'help')
  if (subcommands.length === 0) {
    lines.push('```', help.commandUsage(command), '```', '')
    const args = help.visibleArguments(command)
    if (args.length) {
      lines.push('Arguments:', '')
      for (const a of args) {
        const text = help.argumentDescription(a)
        lines.push(`- \`${help.argumentTerm(a)}\`${text ? `: ${prose(text)}` : ''}`)
      }
      lines.push('')
    }
    const options = optionLines(help, command)
    if (options.length) lines.push('Options:', '', ...options, '')
  } else {
    lines.push(`Commands: ${subcommands.map((c) => `\`${c.name()}\``).join(', ')}.`, '')
  }
  const examples = examplesOf(command)
  if (examples.length) lines.push('Examples:', '', '```sh', ...examples, '```', '')
  for (const sub of subcommands) lines.push(...section(help, sub, depth + 1))
  return lines
}

/** docs/osctl.md as the command definitions make it, before prettier formats it (writeGenerated). */
export async function renderReference(): Promise<string> {
  const program = await buildProgram(() => {
    throw new Error('the reference runs no command')
  })
  const help = program.createHelp()
  const top = help.visibleCommands(program).filter((c) => c.name() !== 'help')
  const lines = [
    '# osctl reference',
    '',
    '<!-- Generated from the command definitions by `npm run docs:cli` (scripts/cli-reference.ts). Do not edit by hand. -->',
    '',
    prose(help.commandDescription(program)),
    '',
    '```',
    help.commandUsage(program),
    '```',
    '',
    'Options of every command:',
    '',
    ...optionLines(help, program),
    '',
    'Exit codes (every command: 0, 1, 2, 3 and 4; the others only where named):',
    '',
    '| code | meaning | commands |',
    '| --- | --- | --- |',
    ...(Object.keys(exitCodes) as (keyof typeof exitCodes)[]).map((name) => {
      const { meaning, commands } = exitCodeTable[name]
      return `| ${exitCodes[name]} | ${meaning.replace(/\|/g, '\\|')} | ${(commands ?? ['every command']).map((c) => (c === 'every command' ? c : `\`osctl ${c}\``)).join(', ')} |`
    }),
    '',
    'Commands:',
    '',
    ...top.map(
      (c) =>
        `- [${c.name()}](#${fullName(c).replace(/\s+/g, '-')}): ${prose(help.commandDescription(c))}`,
    ),
    '',
    ...top.flatMap((c) => section(help, c, 1)),
  ]
  return lines.join('\n')
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await mkdir(dirname(referenceFile), { recursive: true })
  const options = (await prettier.resolveConfig(referenceFile)) ?? {}
  await writeGenerated(referenceFile, 'docs:cli', await renderReference(), options)
  process.stdout.write(`wrote ${referenceFile}\n`)
}

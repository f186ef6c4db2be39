import type { Command } from 'commander'
import { describe, expect, it } from 'vitest'
import { buildProgram } from '../../cli/program.js'

const program = await buildProgram(() => {
  throw new Error('no command runs in this test')
})

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

describe('osctl --help', () => {
  it.each(leaves(program))('%s shows an example', (_name, command) => {
    expect(help(command)).toMatch(/\nExamples:\n {2}\$ .*osctl /)
  })
})

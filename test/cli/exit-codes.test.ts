import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { Command } from 'commander'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'
import { exitCodeTable, exitCodes } from '../../cli/errors.js'
import { buildProgram } from '../../cli/program.js'
import { referenceFile } from '../../scripts/cli-reference.js'
import { projectRoot } from '../../shared/paths.js'

// docs/osctl.md's table of exit codes (issues 48, 51), held to osctl: every command it names exists, the
// page lists every code, and no source of osctl exits with a code the table does not have.

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name))
}

describe('the exit codes of osctl', () => {
  it('tell failures apart (issue 51): failed, usage, unreachable or the URL wrong, credentials, pending', () => {
    expect(exitCodes).toEqual({
      ok: 0,
      failed: 1,
      usage: 2,
      unreachable: 3,
      auth: 4,
      pending: 8,
      interrupted: 130,
    })
  })

  it('name commands that exist', async () => {
    const program = await buildProgram(() => {
      throw new Error('no command runs')
    })
    const find = (path: string) =>
      path
        .split(' ')
        .reduce<Command | undefined>(
          (command, name) => command?.commands.find((c) => c.name() === name),
          program,
        )
    for (const [name, row] of Object.entries(exitCodeTable))
      for (const command of row.commands ?? [])
        expect(find(command), `${name}: osctl ${command}`).toBeDefined()
  })

  it('are each a row of docs/osctl.md', async () => {
    const page = await readFile(referenceFile, 'utf8')
    for (const code of Object.values(exitCodes))
      expect(page).toMatch(new RegExp(`^\\| ${code} +\\| `, 'm'))
  })

  it('are the only ones osctl exits with: no number in place of exitCodes.<name>', async () => {
    const found: string[] = []
    for (const file of await sources(join(projectRoot, 'cli'))) {
      const text = await readFile(file, 'utf8')
      const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
      const visit = (node: ts.Node) => {
        const numberAt = (expr: ts.Node | undefined) =>
          expr && ts.isNumericLiteral(expr) && found.push(`${file}: ${node.getText().slice(0, 80)}`)
        // new CliError(message, 3) and friends
        if (ts.isNewExpression(node) && /Error$/.test(node.expression.getText()))
          numberAt(node.arguments?.[1])
        // exitCode = 3, process.exitCode = 3, { exitCode: 3 }
        if (
          ts.isBinaryExpression(node) &&
          node.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
          /exitCode$/.test(node.left.getText())
        )
          numberAt(node.right)
        if (ts.isPropertyAssignment(node) && node.name.getText() === 'exitCode')
          numberAt(node.initializer)
        ts.forEachChild(node, visit)
      }
      visit(source)
    }
    expect(found).toEqual([])
  })
})

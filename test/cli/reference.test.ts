import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { buildProgram } from '../../cli/program.js'
import { referenceFile, renderReference } from '../../scripts/cli-reference.js'
import { readGenerated } from '../../scripts/generated.js'
import { projectRoot } from '../../shared/paths.js'

describe('docs/osctl.md', () => {
  it('is the reference the command definitions make', async () => {
    const { current } = await readGenerated(referenceFile, await renderReference())
    expect(
      current,
      'docs/osctl.md is out of date with the osctl commands: run `npm run docs:cli`',
    ).toBe(true)
  })
})

describe("docs/usage.md's osctl summary", () => {
  it('names every command group', async () => {
    const usage = await readFile(join(projectRoot, 'docs', 'usage.md'), 'utf8')
    const summary = usage.split('## Commands in brief')[1]!.split('```')[1]!
    const program = await buildProgram(() => {
      throw new Error('no command runs in this test')
    })
    const missing = program.commands
      .map((c) => c.name())
      .filter((name) => !new RegExp(`(^|\\s)osctl ${name}(\\s|$)`, 'm').test(summary))
    expect(missing).toEqual([])
  })
})

import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { referenceFile, renderReference } from '../../scripts/cli-reference.js'

describe('docs/osctl.md', () => {
  it('is the reference the command definitions make', async () => {
    const written = await readFile(referenceFile, 'utf8').catch(() => '')
    const fresh = await renderReference()
    // Compared as text, not with toEqual: a diff of 2,000 lines says less than the fix does.
    expect(
      written === fresh,
      'docs/osctl.md is out of date with the osctl commands: run `npm run docs:cli`',
    ).toBe(true)
  })
})

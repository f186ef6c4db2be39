import { readFile, readdir } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { describe, expect, it } from 'vitest'
import * as locks from '../../../server/db/locks.js'
import { projectRoot } from '../../../shared/paths.js'

// Advisory locks (issue 28; docs/locks.md): every key is made in server/db/locks.ts, and the page lists
// every lock that module makes.

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true })
  const nested = await Promise.all(
    entries.map((e) =>
      e.isDirectory()
        ? sources(join(dir, e.name))
        : e.name.endsWith('.ts')
          ? [join(dir, e.name)]
          : [],
    ),
  )
  return nested.flat()
}

describe('advisory locks', () => {
  it('have their keys made in server/db/locks.ts only', async () => {
    const made: string[] = []
    for (const file of await sources(join(projectRoot, 'server'))) {
      const name = relative(projectRoot, file)
      if (name === 'server/db/locks.ts') continue
      const text = await readFile(file, 'utf8')
      for (const [n, line] of text.split('\n').entries())
        if (/hashtextextended\(|advisory_(xact_)?lock\((?!\$\{laneKey|key\))/.test(line))
          made.push(`${name}:${n + 1}: ${line.trim()}`)
    }
    expect(made).toEqual([])
  })

  it('are each listed in docs/locks.md', async () => {
    const page = await readFile(join(projectRoot, 'docs', 'locks.md'), 'utf8')
    const functions = Object.entries(locks)
      .filter(([, value]) => typeof value === 'function')
      .map(([name]) => name)
    expect(functions.length).toBeGreaterThan(5)
    expect(functions.filter((name) => !page.includes(`\`${name}\``))).toEqual([])
  })

  // Issue 42: a lock whose place in the order is not written down is one the next change may take
  // in the wrong place (lockConfig and tryLockRetention came after the order was written, without it).
  it('each have their place in the order written in docs/locks.md', async () => {
    const page = await readFile(join(projectRoot, 'docs', 'locks.md'), 'utf8')
    const section = page
      .split('### Where each advisory lock stands in the order')[1]
      ?.split('\n## ')[0]
    expect(section).toBeTruthy()
    const functions = Object.entries(locks)
      .filter(([, value]) => typeof value === 'function')
      .map(([name]) => name)
    expect(functions.filter((name) => !section!.includes(`\`${name}\``))).toEqual([])
  })
})

import { existsSync } from 'node:fs'
import { readFile, readdir } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { projectRoot } from '../shared/paths.js'

// The README and docs/ are read in a clone (issue 28): every link to a file resolves inside it, and
// every page of docs/ a source file names for more is there.

describe('the README and docs/', () => {
  it('link only to files the repository holds', async () => {
    const pages = [
      join(projectRoot, 'README.md'),
      ...(await readdir(join(projectRoot, 'docs')))
        .filter((f) => f.endsWith('.md'))
        .map((f) => join(projectRoot, 'docs', f)),
    ]
    const dead: string[] = []
    for (const page of pages) {
      const text = await readFile(page, 'utf8')
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target!) || target!.startsWith('#')) continue
        const file = resolve(dirname(page), target!.split('#')[0]!)
        if (!file.startsWith(projectRoot) || !existsSync(file))
          dead.push(`${page.slice(projectRoot.length + 1)}: ${target}`)
      }
    }
    expect(dead).toEqual([])
  })

  it('are there for every page of docs/ the sources name', async () => {
    const missing: string[] = []
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(join(projectRoot, dir), { withFileTypes: true })) {
        const path = join(dir, entry.name)
        if (entry.isDirectory()) await walk(path)
        else if (entry.name.endsWith('.ts') || entry.name.endsWith('.tsx')) {
          const text = await readFile(join(projectRoot, path), 'utf8')
          for (const [page] of text.matchAll(/\bdocs\/[a-z0-9-]+\.md\b/g))
            if (!existsSync(join(projectRoot, page))) missing.push(`${path}: ${page}`)
        }
      }
    }
    for (const dir of ['server', 'cli', 'shared']) await walk(dir)
    expect(missing).toEqual([])
  })
})

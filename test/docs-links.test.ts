import { existsSync } from 'node:fs'
import { readFile, readdir } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { projectRoot } from '../shared/paths.js'

// The README and docs/ are read in a clone (issue 28): every link to a file resolves inside it.

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
})

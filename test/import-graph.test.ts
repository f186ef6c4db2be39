import { readFileSync, readdirSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

// No import circles (STYLE: Growing without tangling): a circle means a concept is in the wrong file.
// The same check as `npx madge --circular --extensions ts,tsx server shared cli`, without the package:
// every relative import counts, `import type` too (a type-only circle is a concept in the wrong file
// as much as any), and so does an `import('…')` with a literal name.

const root = resolve(import.meta.dirname, '..')
const sourceDirs = ['server', 'shared', 'cli']

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return /\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : []
  })
}

/**
 * The relative module names a file imports, re-exports or loads. TypeScript's own scan for a file's
 * imports (the one its language service uses), without building the file's syntax tree: a tenth of a
 * full parse's time, and the same names for every source here.
 */
function importedNames(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true)
  return importedFiles.map((f) => f.fileName).filter((name) => name.startsWith('.'))
}

/**
 * The import graph of the sources: file -> files it imports, both relative to the project. Made once
 * for the file's tests, which all read the same sources: parsing every source is a second of a core.
 */
let sourceGraph: Map<string, string[]> | undefined
function importGraph(): Map<string, string[]> {
  return (sourceGraph ??= makeImportGraph())
}

function makeImportGraph(): Map<string, string[]> {
  const files = sourceDirs.flatMap((dir) => sourceFiles(join(root, dir)))
  const known = new Set(files)
  const graph = new Map<string, string[]>()
  for (const file of files) {
    const targets = importedNames(file).flatMap((name) => {
      const base = resolve(dirname(file), name).replace(/\.js$/, '')
      const target = [`${base}.ts`, `${base}.tsx`, join(base, 'index.ts')].find((f) => known.has(f))
      return target ? [relative(root, target)] : []
    })
    graph.set(relative(root, file), [...new Set(targets)])
  }
  return graph
}

/**
 * One circle through each group of files that import each other (Tarjan's strongly connected
 * components), each as the path a -> b -> ... -> a.
 */
function circles(graph: Map<string, string[]>): string[][] {
  let counter = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const groups: string[][] = []
  const connect = (v: string) => {
    index.set(v, counter)
    low.set(v, counter++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = []
      let w: string
      do {
        w = stack.pop()!
        onStack.delete(w)
        group.push(w)
      } while (w !== v)
      if (group.length > 1 || graph.get(v)?.includes(v)) groups.push(group)
    }
  }
  for (const v of graph.keys()) if (!index.has(v)) connect(v)
  return groups.map((group) => circleIn(graph, new Set(group)))
}

/** A path from the group's first file (in name order) back to it, inside the group. */
function circleIn(graph: Map<string, string[]>, group: Set<string>): string[] {
  const start = [...group].sort()[0]!
  const cameFrom = new Map<string, string>()
  const queue = [start]
  while (queue.length) {
    const v = queue.shift()!
    for (const w of graph.get(v) ?? []) {
      if (!group.has(w)) continue
      if (w === start) {
        const path = [v]
        for (let at = v; at !== start;) path.unshift((at = cameFrom.get(at)!))
        return [...path, start]
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, v)
        queue.push(w)
      }
    }
  }
  return [...group]
}

describe('the import graph (STYLE: No import circles)', () => {
  it('finds a circle where there is one, and the arrows the sources have', () => {
    const made = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts', 'd.ts']],
      ['d.ts', []],
    ])
    expect(circles(made)).toEqual([['a.ts', 'b.ts', 'c.ts', 'a.ts']])
    const graph = importGraph()
    expect(graph.get('server/domain/runs/start.ts')).toContain('server/domain/tasks/index.ts')
    expect(graph.get('server/http/context.ts')).toContain('server/http/caches.ts') // import type
    expect(graph.get('cli/commands/gates.ts')).toContain('cli/tui/gate-review.tsx') // import()
  })

  it('has no circle in server/, shared/ or cli/', () => {
    const found = circles(importGraph()).map((circle) => circle.join(' -> '))
    expect(found).toEqual([])
  })

  it('meets a concept folder of domain/ or engine/ only through its face (index.ts)', () => {
    expect(faceBreaks(importGraph())).toEqual([])
  })

  it('keeps domain/ below the engine and the HTTP layer (DESIGN 2)', () => {
    expect(upwardImports(importGraph())).toEqual([])
  })

  it('finds a face broken and an upward import where there is one', () => {
    const made = new Map([
      [
        'server/domain/runs/start.ts',
        ['server/domain/tasks/tasks.ts', 'server/domain/runs/rows.ts'],
      ],
      ['server/routes/runs.ts', ['server/domain/runs/index.ts']],
      ['server/domain/chats/chats.ts', ['server/engine/index.ts']],
    ])
    expect(faceBreaks(made)).toEqual([
      'server/domain/runs/start.ts -> server/domain/tasks/tasks.ts (use server/domain/tasks/index.ts)',
    ])
    expect(upwardImports(made)).toEqual(['server/domain/chats/chats.ts -> server/engine/index.ts'])
  })
})

/**
 * Imports into a concept folder of domain/ or engine/ that pass by its face (STYLE: A folder has a
 * face): files of one folder import each other directly; any other file imports the folder's index.ts,
 * so the inside of a folder may change freely.
 */
function faceBreaks(graph: Map<string, string[]>): string[] {
  const folder = (file: string) => /^server\/(domain|engine)\/([^/]+)\//.exec(file)
  const wrong: string[] = []
  for (const [file, targets] of graph)
    for (const target of targets) {
      const into = folder(target)
      if (!into) continue
      const face = `server/${into[1]}/${into[2]}/index.ts`
      const from = folder(file)
      const inside = from && from[1] === into[1] && from[2] === into[2]
      if (!inside && target !== face) wrong.push(`${file} -> ${target} (use ${face})`)
    }
  return wrong
}

/** Imports from domain/ into the engine, the HTTP layer or the admin commands (DESIGN 2). */
function upwardImports(graph: Map<string, string[]>): string[] {
  return [...graph].flatMap(([file, targets]) =>
    file.startsWith('server/domain/')
      ? targets
          .filter((t) => /^server\/(engine|http|routes|admin)\//.test(t))
          .map((t) => `${file} -> ${t}`)
      : [],
  )
}

import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { packageVersion, projectRoot } from '../../shared/paths.js'
import { osctl } from '../helpers/processes.js'

// osctl starts for every command a pipeline runs: what it loads before it acts is kept small. zod and
// the wire schemas (a third of its start-up) are not among it; the choices commands offer come from
// shared/values.ts. A screen (ink) is loaded only by the command that draws it; the profile store (conf)
// and the HTTP client's undici (together more than half of the rest) when a command acts.
// `osctl --version` loads not even the command tree: main.ts answers it and hands the rest to run.ts.
// The tree loads the module of the command a line names, and no other (issue 30): `osctl --help` none.

/** The modules `from` loads as it starts: static imports that are not type-only, followed. */
function loadedAtStart(from: string, seen = new Set<string>()): Set<string> {
  if (seen.has(from)) return seen
  seen.add(from)
  const source = readFileSync(from, 'utf8')
  for (const [, clause, specifier] of source.matchAll(
    /^(?:import|export)\s+(type\s+)?[^'"]*?from\s+'([^']+)'/gm,
  )) {
    if (clause) continue
    if (!specifier!.startsWith('.')) {
      seen.add(specifier!)
      continue
    }
    const base = resolve(dirname(from), specifier!).replace(/\.js$/, '')
    const file = ['.ts', '.tsx'].map((ext) => base + ext).find((f) => existsSync(f))
    if (file) loadedAtStart(file, seen)
  }
  return seen
}

const loadedFrom = (file: string) =>
  [...loadedAtStart(join(projectRoot, 'cli', file))].map((m) =>
    m.startsWith('/') ? relative(projectRoot, m) : m,
  )

/** The command modules program.ts loads, each when a command line names its command. */
const commandModules = [
  ...readFileSync(join(projectRoot, 'cli', 'program.ts'), 'utf8').matchAll(
    /import\('\.\/(commands\/[^']+)\.js'\)/g,
  ),
].map((m) => `${m[1]}.ts`)

describe('osctl start-up', () => {
  const loaded = loadedFrom('run.ts')
  // What any command line may load before its command acts: run.ts's and its command's modules.
  const beforeActing = [...new Set([loaded, ...commandModules.map(loadedFrom)].flat())]

  it('follows the imports (the walk itself works)', () => {
    expect(loaded).toContain('cli/program.ts')
    expect(loaded).toContain('commander')
    expect(commandModules).toContain('commands/runs.ts')
    expect(beforeActing).toContain('cli/commands/runs.ts')
    expect(beforeActing).toContain('shared/values.ts')
  })

  it('loads no command module before it knows the command', () => {
    expect(loaded.filter((m) => m.startsWith('cli/commands/'))).toEqual(['cli/commands/about.ts'])
  })

  it('loads neither zod nor the wire schemas, nor ink, before a command acts', () => {
    expect(beforeActing.filter((m) => m === 'zod' || m.startsWith('shared/schemas/'))).toEqual([])
    expect(
      beforeActing.filter((m) => ['ink', 'react', 'cli/tui/gate-review.tsx'].includes(m)),
    ).toEqual([])
  })

  it('loads neither the profile store nor undici before a command acts', () => {
    expect(
      beforeActing.filter((m) => ['conf', 'undici', 'cli/deps.ts', 'cli/profiles.ts'].includes(m)),
    ).toEqual([])
  })

  it('answers --version from main.ts before loading commander or a command', () => {
    const version = loadedFrom('main.ts')
    expect(version).toContain('shared/paths.ts')
    expect(
      version.filter((m) => m === 'commander' || (m.startsWith('cli/') && m !== 'cli/main.ts')),
    ).toEqual([])
  })

  it('prints the version as commander does, by itself or after other options', async () => {
    const answers = await Promise.all(
      [['--version'], ['-V'], ['--json', '--version']].map((args) => osctl(args)),
    )
    for (const answer of answers) {
      expect([answer.exitCode, answer.stdout, answer.stderr]).toEqual([0, packageVersion, ''])
    }
  })

  it('prints the help on stdout when called alone, exit 0 (issue 51)', async () => {
    const alone = await osctl([])
    expect(alone.exitCode).toBe(0)
    expect(alone.stdout).toMatch(/^Usage: osctl \[options\] \[command\]/)
    expect(alone.stdout).toMatch(/^ {2}runs\b/m)
    expect(alone.stderr).toBe('')
  })
})

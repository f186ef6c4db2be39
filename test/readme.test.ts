import { mkdtemp, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLogger } from '../server/log.js'
import { osdCommand, type Running } from '../server/serve.js'
import { projectRoot } from '../shared/paths.js'
import { startFakeModelProvider, type FakeModelProvider } from './fakes/model-provider.js'
import { createTestDatabase, type TestDatabase } from './helpers/db.js'
import { osctl, serveInProcess } from './helpers/osctl.js'
import { osd, osdBin } from './helpers/processes.js'

// The README's "Your first AI team" (issue 35), run as a newcomer runs it: the fenced blocks marked
// `sh first-team`, in order, each command as written and its output checked against the `# ` lines
// under it, against a real osd on an empty database whose local model (OSD_PROVIDER_B_BASE_URL) is
// the test suite's fake, answering as a member would. A README edit that breaks the path fails here.
//
// What the test stands in for, and nothing else:
// - `npm install` is done: the suite runs in an installed, built tree;
// - `./bin/osd serve` is osd served in this process as bin/osd serves it (server/serve.ts), on a free
//   port: the README's address (http://127.0.0.1:8080/v1) is read as that port's, both ways, and the
//   local model's address as the fake's;
// - `./bin/osctl` runs in process (test/helpers/osctl.ts) with a config dir of its own and a terminal
//   for its output, as a person has; `./bin/osd admin` is the built osd, a process.
//
// In the documented output, `…` stands for any text and `# …` alone for any lines (none included); a
// clock time stands for any time; spaces count as one; an upper-case word that a later command uses
// (TOKEN, GATE) stands for the value found there, and the command gets that value. A block marked
// `first-team waits` leaves its last command running once its output so far has shown; a block
// marked `first-team output` is more output of that command, which must then end, exit 0.

const readmeAddress = 'http://127.0.0.1:8080/v1'

interface Step {
  /** The command line as written, continuations joined. */
  line: string
  expected: string[]
}

interface Block {
  kind: 'run' | 'waits' | 'output'
  steps: Step[]
  /** An output block's lines. */
  expected: string[]
}

/** The blocks marked for the first team, in order. */
export function firstTeamBlocks(markdown: string): Block[] {
  const blocks: Block[] = []
  for (const [, kind, text] of markdown.matchAll(
    /^```sh first-team(?: (waits|output))?\n([\s\S]*?)^```$/gm,
  )) {
    const block: Block = { kind: (kind as Block['kind']) ?? 'run', steps: [], expected: [] }
    let pending = ''
    for (const raw of text!.split('\n')) {
      if (raw.startsWith('#')) {
        const line = raw.replace(/^# ?/, '')
        if (line.trim()) (block.steps.at(-1)?.expected ?? block.expected).push(line)
        continue
      }
      if (!raw.trim()) continue
      if (raw.endsWith('\\')) {
        pending += raw.slice(0, -1)
        continue
      }
      block.steps.push({ line: pending + raw, expected: [] })
      pending = ''
    }
    if (block.kind === 'output' && block.steps.length)
      throw new Error('a `first-team output` block holds output only, no command')
    blocks.push(block)
  }
  return blocks
}

// --- the shell of the path: words, quotes, `echo|printf ... |`, NAME=value before a command -------

interface Command {
  env: Record<string, string>
  words: string[]
  input?: string
}

function shellWords(line: string): string[] {
  const words: string[] = []
  let word: string | undefined
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!
    if (c === "'" || c === '"') {
      const end = line.indexOf(c, i + 1)
      if (end < 0) throw new Error(`unclosed quote in: ${line}`)
      const quoted = line.slice(i + 1, end)
      if (c === '"' && /[$`\\]/.test(quoted))
        throw new Error(`the path's commands expand nothing: ${line}`)
      word = (word ?? '') + quoted
      i = end
    } else if (c === ' ') {
      if (word !== undefined) words.push(word)
      word = undefined
    } else if (c === '|') {
      if (word !== undefined) words.push(word)
      words.push('|')
      word = undefined
    } else {
      if ('$`\\;&<>()'.includes(c)) throw new Error(`the path's commands expand nothing: ${line}`)
      word = (word ?? '') + c
    }
  }
  if (word !== undefined) words.push(word)
  return words
}

function parseCommand(line: string): Command {
  const words = shellWords(line)
  let input: string | undefined
  const pipe = words.indexOf('|')
  if (pipe >= 0) {
    const [writer, ...args] = words.slice(0, pipe)
    if (writer === 'echo') input = args.join(' ') + '\n'
    else if (writer === 'printf' && (args[0] === '%s' || args[0] === '%s\\n'))
      input = args.slice(1).join('') + (args[0] === '%s' ? '' : '\n')
    else throw new Error(`only echo and printf %s pipe into a command here: ${line}`)
    words.splice(0, pipe + 1)
  }
  const env: Record<string, string> = {}
  while (/^[A-Z_][A-Z0-9_]*=/.test(words[0] ?? '')) {
    const [name, ...value] = words.shift()!.split('=')
    env[name!] = value.join('=')
  }
  return { env, words, input }
}

// --- documented output against a transcript ------------------------------------------------------

/** What a terminal shows of what was written: each line after its last carriage return, no escapes. */
export function screenLines(written: string): string[] {
  return written
    .split('\n')
    .map((line) => line.slice(line.lastIndexOf('\r') + 1).replace(/\x1b\[[0-9;?]*[A-Za-z]/g, ''))
    .map(oneSpace)
    .filter(Boolean)
}

const oneSpace = (text: string) => text.replace(/\s+/g, ' ').trim()
const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** A documented line as a pattern: `…`, clock times and the placeholders named as above. */
function linePattern(line: string, names: Set<string>, bound: Map<string, string>): RegExp {
  const seen = new Set<string>()
  const pattern = oneSpace(line)
    .split(/(…|\b\d\d:\d\d(?::\d\d)?\b|\b[A-Z][A-Z_]{2,}\b)/)
    .map((piece, i) => {
      if (i % 2 === 0) return escaped(piece)
      if (piece === '…') return '.*?'
      if (/^\d/.test(piece)) return '\\d\\d:\\d\\d(?::\\d\\d)?'
      if (!names.has(piece)) return escaped(piece)
      if (bound.has(piece)) return escaped(bound.get(piece)!)
      if (seen.has(piece)) return `\\k<${piece}>`
      seen.add(piece)
      return `(?<${piece}>[^\\s,;()\`'"]+)`
    })
    .join('')
  return new RegExp(`^${pattern}$`)
}

/**
 * The placeholders' values if the documented lines match the transcript's, in order (`…` alone
 * skipping any lines); the whole transcript when `complete`, else a beginning of it (a command still
 * running). undefined if they do not match.
 */
export function matchOutput(
  expected: string[],
  actual: string[],
  names: Set<string>,
  bound: Map<string, string>,
  complete: boolean,
): Map<string, string> | undefined {
  const match = (
    i: number,
    j: number,
    values: Map<string, string>,
  ): Map<string, string> | undefined => {
    if (i === expected.length) return !complete || j === actual.length ? values : undefined
    if (expected[i]!.trim() === '…') {
      for (let k = j; k <= actual.length; k++) {
        const found = match(i + 1, k, values)
        if (found) return found
      }
      return undefined
    }
    if (j === actual.length) return undefined
    const groups = linePattern(expected[i]!, names, values).exec(actual[j]!)
    if (!groups) return undefined
    const next = new Map([...values, ...Object.entries(groups.groups ?? {})])
    return match(i + 1, j + 1, next)
  }
  return match(0, 0, bound)
}

function mismatch(step: Step, expected: string[], actual: string[], exitCode?: number): string {
  return [
    `README step \`${step.line}\`${exitCode === undefined ? '' : ` exited ${exitCode}`}: its output`,
    ...actual.map((l) => `  | ${l}`),
    'does not show what the README says:',
    ...expected.map((l) => `  # ${l}`),
  ].join('\n')
}

// --- running it ---------------------------------------------------------------------------------

interface Started {
  step: Step
  /** The transcript so far, the README's address in place of the daemon's. */
  lines(): string[]
  /** The exit code; never settles for the daemon. */
  exit: Promise<number>
}

async function eventually<T>(what: () => T | undefined, message: () => string, ms = 30_000) {
  const until = Date.now() + ms
  for (;;) {
    const value = what()
    if (value !== undefined) return value
    if (Date.now() > until) throw new Error(message())
    await new Promise((r) => setTimeout(r, 50))
  }
}

function withTimeout<T>(promise: Promise<T>, message: () => string, ms = 60_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(message())), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}

describe("the README's first AI team", () => {
  let readme: string
  let model: FakeModelProvider
  let db: TestDatabase
  const daemons: Running[] = []

  beforeAll(async () => {
    readme = await readFile(join(projectRoot, 'README.md'), 'utf8')
    db = await createTestDatabase()
    model = await startFakeModelProvider()
    // A local model as the README has it: the member's words in a chat; in the weekly report's run,
    // the gated mail first, then os.finish once the mail's result is back.
    model.onRequest((request) => {
      const tools: string[] = (request.body.tools ?? []).map(
        (t: { function?: { name: string } }) => t.function?.name,
      )
      const mail = tools.find((name) => name?.endsWith('mail_send'))
      const finish = tools.find((name) => name?.endsWith('finish'))
      if (!mail || !finish) return { text: "Hello! I'm Rita: I turn the numbers into a report." }
      if (request.body.messages.at(-1)?.role === 'tool')
        return {
          toolCalls: [{ name: finish, arguments: { outcome: 'succeeded', summary: 'Mailed.' } }],
        }
      const mailed = { to: 'you@example.com', subject: 'Weekly report', body: 'Revenue: +4%.' }
      return { toolCalls: [{ name: mail, arguments: mailed }] }
    })
  })
  afterAll(async () => {
    for (const daemon of daemons) await daemon.stop()
    await model?.close()
  })

  it('asks for every step the issue names, each in a marked block', () => {
    const blocks = firstTeamBlocks(readme)
    const lines = blocks.flatMap((b) => b.steps.map((s) => s.line))
    expect(lines.length).toBeLessThanOrEqual(10)
    for (const wanted of [
      /^OSD_PROVIDER_B_BASE_URL=\S+ \.\/bin\/osd serve$/,
      /^\.\/bin\/osd admin enterprise create /,
      /^\.\/bin\/osctl auth login /,
      /^\.\/bin\/osctl catalog roles clone /,
      /\| \.\/bin\/osctl llm bindings set /,
      /^\.\/bin\/osctl llm tiers override /,
      /^\.\/bin\/osctl chats new .* --wait$/,
      /^\.\/bin\/osctl runs start .* --wait$/,
      /^\.\/bin\/osctl gates decide /,
    ])
      expect(
        lines.some((l) => wanted.test(l)),
        String(wanted),
      ).toBe(true)
    expect(blocks.map((b) => b.kind)).toContain('output')
  })

  it('checks output line by line: a line that differs fails, `…` and placeholders match', () => {
    const names = new Set(['GATE'])
    const shown = ['started run 7 of weekly-report', '12:01:02 waits at gate g-1, decide g-1']
    const doc = ['started run … of weekly-report', '…', '09:00:00 waits at gate GATE, decide GATE']
    expect(matchOutput(doc, shown, names, new Map(), true)).toEqual(new Map([['GATE', 'g-1']]))
    expect(matchOutput(doc, ['started run 7 of weekly-report'], names, new Map(), true)).toBe(
      undefined,
    )
    expect(matchOutput(['gate GATE, GATE'], ['gate a, b'], names, new Map(), true)).toBe(undefined)
    expect(matchOutput(['started run … of daily'], shown, names, new Map(), false)).toBe(undefined)
    expect(screenLines('a\r\x1b[K⠋ spinning\r\x1b[Kb  c\n\r\x1b[K')).toEqual(['b c'])
  })

  it('runs from an empty osd to a chat reply and a run whose gate a person approved', async () => {
    const blocks = firstTeamBlocks(readme)
    const commandWords = blocks.flatMap((b) => b.steps.flatMap((s) => parseCommand(s.line).words))
    const names = new Set(commandWords.filter((w) => /^[A-Z][A-Z_]{2,}$/.test(w)))
    const osctlEnv = { OSCTL_CONFIG_DIR: await mkdtemp(join(tmpdir(), 'osctl-readme-')) }
    let bound = new Map<string, string>()
    let daemonUrl: string | undefined
    const waiting: Started[] = []

    const fromDaemon = (text: string) =>
      daemonUrl ? text.split(daemonUrl).join(readmeAddress) : text
    const toDaemon = (word: string) => {
      for (const [name, value] of bound) if (word === name) return value
      return daemonUrl ? word.split(readmeAddress).join(daemonUrl) : word
    }

    async function start(step: Step, keepsRunning: boolean): Promise<Started> {
      const { env, words, input } = parseCommand(step.line)
      const [program, ...args] = words.map(toDaemon)
      if (program === 'npm' && args.join(' ') === 'install')
        return { step, lines: () => [], exit: Promise.resolve(0) }
      if (program === './bin/osd' && args[0] === 'serve') {
        if (!keepsRunning) throw new Error('./bin/osd serve keeps running: mark its block `waits`')
        const logged: string[] = []
        const log = createLogger('info', { write: (line: string) => void logged.push(line) })
        const daemonEnv = Object.fromEntries(
          Object.entries(env).map(([name, value]) => [
            name,
            /^OSD_PROVIDER_[AB]_BASE_URL$/.test(name) ? model.url : value,
          ]),
        )
        const running = await serveInProcess(db, daemonEnv, log, { osd: osdCommand(osdBin) })
        daemons.push(running)
        daemonUrl = running.url
        return {
          step,
          lines: () => screenLines(fromDaemon(logged.join(''))),
          exit: new Promise(() => undefined),
        }
      }
      if (program === './bin/osd') {
        const result = osd(args, { ...env, DATABASE_URL: db.url }, input)
        let written: string | undefined
        const exit = result.then((r) => {
          written = `${r.stdout}\n${r.stderr}`
          return r.exitCode ?? -1
        })
        return { step, lines: () => screenLines(fromDaemon(written ?? '')), exit }
      }
      if (program === './bin/osctl') {
        const run = osctl(args, { ...osctlEnv, ...env }, input, { terminal: true })
        return {
          step,
          lines: () => screenLines(fromDaemon(run.printed().output)),
          exit: run.then((r) => r.exitCode),
        }
      }
      throw new Error(`the README's path runs npm install, ./bin/osd and ./bin/osctl: ${step.line}`)
    }

    /** Waits for the command's end, exit 0, and its whole documented output. */
    async function finish(started: Started): Promise<void> {
      const { step } = started
      const code = await withTimeout(
        started.exit,
        () => `README step \`${step.line}\` did not end:\n${started.lines().join('\n')}`,
      )
      const lines = started.lines()
      const found = matchOutput(step.expected, lines, names, bound, true)
      expect(found, mismatch(step, step.expected, lines, code)).toBeDefined()
      expect(code, mismatch(step, step.expected, lines, code)).toBe(0)
      bound = found!
    }

    for (const block of blocks) {
      if (block.kind === 'output') {
        const running = waiting.pop()
        if (!running) throw new Error('a `first-team output` block follows no running command')
        running.step.expected.push(...block.expected)
        await finish(running)
        continue
      }
      for (const [i, step] of block.steps.entries()) {
        const keepsRunning = block.kind === 'waits' && i === block.steps.length - 1
        const started = await start(step, keepsRunning)
        if (!keepsRunning) {
          await finish(started)
          continue
        }
        // What it has shown so far is what the README shows before the next step.
        bound = await eventually(
          () => matchOutput(step.expected, started.lines(), names, bound, false),
          () => mismatch(step, step.expected, started.lines()),
        )
        if (!step.line.includes(' serve')) waiting.push(started)
      }
    }
    for (const running of waiting) await finish(running)

    // The local model answered every call, with the model the README's override names.
    const override = blocks
      .flatMap((b) => b.steps)
      .map((s) => parseCommand(s.line).words)
      .find((w) => w.includes('override'))!
    const localModel = override[override.indexOf('--model') + 1]
    expect(model.requests.length).toBeGreaterThanOrEqual(3)
    expect(new Set(model.requests.map((r) => `${r.format} ${r.model}`))).toEqual(
      new Set([`b ${localModel}`]),
    )
    expect(model.requests.filter((r) => r.invalid)).toEqual([])
  }, 120_000)
})

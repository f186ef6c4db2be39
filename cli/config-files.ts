import { readdir, readFile, mkdir, rm, stat, writeFile } from 'node:fs/promises'
import { dirname, join, relative, sep } from 'node:path'
import YAML from 'yaml'
import type { ConfigDocument } from '../shared/schemas/config.js'
import { CliError, UsageError } from './errors.js'

// The files of `osctl config export`, `osctl diff -f` and `osctl apply -f` (issue 48): one YAML
// document per object, one file per object, in a layout and a formatting that never depend on when
// or where they were written, so that exporting an unchanged enterprise twice gives the same bytes.

/** A document's YAML as osctl writes it: no folding of long lines (a diff shows the change). */
export function toYaml(doc: unknown): string {
  return YAML.stringify(doc, { lineWidth: 0 })
}

/** Where a kind's files go under the export's directory: a folder, or one file for a singleton. */
const kindPlace: Record<string, { dir: string } | { file: string }> = {
  Settings: { file: 'settings.yaml' },
  Team: { dir: 'teams' },
  Role: { dir: 'roles' },
  Member: { dir: 'members' },
  Task: { dir: 'tasks' },
  ToolConnection: { dir: 'tools' },
  ModelKey: { dir: 'model-keys' },
  ModelTiers: { file: 'model-tiers.yaml' },
  SpendLimits: { file: 'spend-limits.yaml' },
}

/**
 * A name as a file name: lower case, letters, digits, `_` and `-` only, so that no name the server
 * answers (a member's, with spaces or a slash) can reach outside the directory or hide a file.
 */
function fileSlug(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^-+|-+$/g, '')
  return slug || 'object'
}

/** The relative path of each document's file, in the documents' order; two alike get -2, -3... */
export function filesOf(documents: ConfigDocument[]): string[] {
  const taken = new Set<string>()
  return documents.map((doc) => {
    const place = kindPlace[doc.kind] ?? { dir: fileSlug(doc.kind) }
    let base: string
    if ('file' in place) base = place.file.replace(/\.yaml$/, '')
    else {
      const parts = [place.dir]
      if (doc.metadata.layer) parts.push(doc.metadata.layer.split('/').map(fileSlug).join('-'))
      // A role of a team is `team/slug`: a folder per team. Any other name is one file name.
      const name = doc.kind === 'Role' ? doc.metadata.name.split('/') : [doc.metadata.name]
      parts.push(...name.map(fileSlug))
      base = parts.join('/')
    }
    let path = `${base}.yaml`
    for (let n = 2; taken.has(path); n++) path = `${base}-${n}.yaml`
    taken.add(path)
    return path
  })
}

/** Every .yaml and .yml file under `dir`, as paths relative to it, in code-point order. */
async function yamlFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile() && /\.ya?ml$/.test(e.name))
    .map((e) => relative(dir, join(e.parentPath, e.name)).split(sep).join('/'))
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
}

/** Whether a file holds osd's documents only (what an export wrote): those an export may remove. */
function isOsdFile(text: string): boolean {
  try {
    const docs = YAML.parseAllDocuments(text)
    return (
      docs.length > 0 &&
      docs.every(
        (d) =>
          d.errors.length === 0 && (d.toJS() as { apiVersion?: unknown })?.apiVersion === 'osd/v1',
      )
    )
  } catch {
    return false
  }
}

/**
 * Writes one file per document under `dir`, and removes the files of osd documents an earlier export
 * left there for objects that are gone (other files are left alone). Answers the paths written.
 */
export async function writeExport(dir: string, documents: ConfigDocument[]): Promise<string[]> {
  const paths = filesOf(documents)
  await mkdir(dir, { recursive: true }).catch((err: NodeJS.ErrnoException) => {
    // EEXIST: `dir` is a file; ENOTDIR: one of its parents is.
    if (err.code === 'EEXIST' || err.code === 'ENOTDIR')
      throw new UsageError(`cannot export to ${dir}: it is not a directory`)
    throw new CliError(`cannot export to ${dir}: ${err.code ?? err.message}`)
  })
  const before = await yamlFiles(dir)
  const written = new Set(paths)
  for (const path of before) {
    if (written.has(path)) continue
    const full = join(dir, path)
    if (isOsdFile(await readFile(full, 'utf8'))) await rm(full)
  }
  for (const [i, path] of paths.entries()) {
    const full = join(dir, path)
    await mkdir(dirname(full), { recursive: true })
    await writeFile(full, toYaml(documents[i]))
  }
  return paths
}

/** Documents read from files, each with the file (and its place in it) it came from. */
export interface ReadDocuments {
  documents: unknown[]
  sources: string[]
}

/**
 * The documents of `-f PATH`: a file (`-` reads stdin), or every .yaml/.yml file under a directory in
 * path order; a file may hold several documents (`---`). A file that is not YAML is a usage error
 * naming it and the line.
 */
export async function readDocuments(
  path: string,
  stdin: () => Promise<string>,
): Promise<ReadDocuments> {
  const files: { name: string; text: string }[] = []
  if (path === '-') files.push({ name: '(stdin)', text: await stdin() })
  else {
    const info = await stat(path).catch((err: NodeJS.ErrnoException) => {
      throw new UsageError(`cannot read ${path}: ${err.code ?? err.message}`)
    })
    if (info.isDirectory()) {
      for (const file of await yamlFiles(path))
        files.push({ name: join(path, file), text: await readFile(join(path, file), 'utf8') })
      if (files.length === 0) throw new UsageError(`no .yaml or .yml file under ${path}`)
    } else files.push({ name: path, text: await readFile(path, 'utf8') })
  }
  const out: ReadDocuments = { documents: [], sources: [] }
  for (const file of files) {
    const docs = YAML.parseAllDocuments(file.text)
    for (const [n, doc] of docs.entries()) {
      const [error] = doc.errors
      if (error) {
        const line = error.linePos?.[0]?.line
        throw new UsageError(
          `${file.name}${line ? `:${line}` : ''}: not YAML: ${error.message.split('\n')[0]}`,
        )
      }
      // Parsed, but values yaml refuses to make: an alias expanded too often (a "billion laughs"), say.
      let value: unknown
      try {
        value = doc.toJS()
      } catch (err) {
        throw new UsageError(
          `${file.name}: YAML osctl cannot read: ${(err as Error).message.split('\n')[0]}`,
        )
      }
      if (value === null || value === undefined) continue
      out.documents.push(value)
      out.sources.push(docs.length > 1 ? `${file.name} (document ${n + 1})` : file.name)
    }
  }
  return out
}

/** The secrets the documents name (`tokenFrom: env:NAME`) that osctl's environment holds, by NAME. */
export function secretsOf(documents: unknown[], env: NodeJS.ProcessEnv): Record<string, string> {
  const secrets: Record<string, string> = {}
  for (const doc of documents) {
    const ref = (doc as { spec?: { tokenFrom?: unknown } } | null)?.spec?.tokenFrom
    if (typeof ref !== 'string' || !ref.startsWith('env:')) continue
    const name = ref.slice('env:'.length)
    const value = env[name]
    if (value) secrets[name] = value
  }
  return secrets
}

// --- unified diff -----------------------------------------------------------------------------------

/**
 * A unified diff of two texts by line (three lines of context), as `diff -u` prints it after its
 * header; empty when they are equal. Documents are small: a longest common subsequence is enough.
 */
export function unifiedDiff(a: string, b: string, context = 3): string {
  const x = a === '' ? [] : a.replace(/\n$/, '').split('\n')
  const y = b === '' ? [] : b.replace(/\n$/, '').split('\n')
  const n = x.length
  const m = y.length
  // lcs[i][j]: the length of the longest common subsequence of x[i..] and y[j..].
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1))
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      lcs[i]![j] =
        x[i] === y[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!)
  type Op = { op: ' ' | '-' | '+'; line: string; ai: number; bi: number }
  const ops: Op[] = []
  let i = 0
  let j = 0
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) ops.push({ op: ' ', line: x[i]!, ai: i++, bi: j++ })
    // On a tie, the line removed first: `-old` then `+new`, as diff -u prints a change.
    else if (i < n && (j === m || lcs[i + 1]![j]! >= lcs[i]![j + 1]!))
      ops.push({ op: '-', line: x[i]!, ai: i++, bi: j })
    else ops.push({ op: '+', line: y[j]!, ai: i, bi: j++ })
  }
  const changed = ops.flatMap((o, k) => (o.op === ' ' ? [] : [k]))
  if (changed.length === 0) return ''
  // Hunks: runs of changes whose contexts touch.
  const hunks: [number, number][] = []
  for (const k of changed) {
    const last = hunks.at(-1)
    if (last && k - last[1] <= 2 * context) last[1] = k
    else hunks.push([k, k])
  }
  const out: string[] = []
  for (const [first, lastChange] of hunks) {
    const start = Math.max(0, first - context)
    const end = Math.min(ops.length - 1, lastChange + context)
    const slice = ops.slice(start, end + 1)
    const aLines = slice.filter((o) => o.op !== '+').length
    const bLines = slice.filter((o) => o.op !== '-').length
    const aStart = aLines === 0 ? slice[0]!.ai : slice[0]!.ai + 1
    const bStart = bLines === 0 ? slice[0]!.bi : slice[0]!.bi + 1
    out.push(`@@ -${aStart},${aLines} +${bStart},${bLines} @@`)
    for (const o of slice) out.push(`${o.op}${o.line}`)
  }
  return out.join('\n') + '\n'
}

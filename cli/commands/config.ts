import type { Command } from 'commander'
import type {
  ConfigApplied,
  ConfigChange,
  ConfigExport,
  ConfigPlan,
} from '../../shared/schemas/config.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import { readDocuments, secretsOf, toYaml, unifiedDiff, writeExport } from '../config-files.js'
import type { Deps } from '../deps.js'
import { ApiRequestError, CliError, afterAnswer, exitCodes } from '../errors.js'
import { printJson, show } from '../output.js'
import { safeText } from '../safe-text.js'
import { about } from './about.js'

// Configuration as code (issue 48; DESIGN 15), in kubectl's shapes: `osctl config export DIR`,
// `osctl diff -f PATH` (exit 0: nothing would change, 1: something would, more: an error) and
// `osctl apply -f PATH [--prune] [--dry-run]`. The server plans and applies (GET /v1/config, POST
// /v1/config/plan|apply); osctl reads and writes the files, and sends the secrets the documents name
// (`tokenFrom: env:NAME`) from its own environment, never from a file.

/** `kind/name` as a line names an object: lower-case kind, and its layer when it has one. */
function objectName(change: Pick<ConfigChange, 'kind' | 'name' | 'layer'>): string {
  const name = `${change.kind.toLowerCase()}/${change.name}`
  return safeText(change.layer ? `${name} (${change.layer})` : name)
}

/** What the documents and the secrets they name are, read from `-f`. */
async function bodyOf(deps: Deps, path: string, extra: Record<string, unknown>) {
  const { documents, sources } = await readDocuments(path, deps.stdin)
  return { body: { documents, secrets: secretsOf(documents, process.env), ...extra }, sources }
}

/** A refusal that names a document by its index says which file it came from. */
function withSource(err: unknown, sources: string[]): unknown {
  if (!(err instanceof ApiRequestError)) return err
  const index = (err.body as { document?: { index?: unknown } } | undefined)?.document?.index
  if (typeof index === 'number' && sources[index] !== undefined)
    err.hint = `documents[${index}] is ${sources[index]}`
  return err
}

export async function configExport(deps: Deps, dir: string): Promise<void> {
  const answer = await deps.client().get<ConfigExport>('/config')
  const paths = await writeExport(dir, answer.documents)
  show(deps.out, { base: answer.base, files: paths }, () =>
    deps.out.write(`${paths.length} objects written to ${safeText(dir)}\n`),
  )
}

export async function diff(deps: Deps, opts: { file: string; prune?: boolean }): Promise<void> {
  let changes: number
  try {
    changes = await showDiff(deps, opts)
  } catch (err) {
    // kubectl's shape: 1 means "something would change", so no failure may exit 1. One that would
    // exits 3, the code of the failures that are not osctl's usage or credentials (osd out of reach);
    // so does one that is not osctl's own (a bug), said as report() says those, with where it was.
    if (!(err instanceof CliError))
      throw new CliError((err as Error)?.stack ?? String(err), exitCodes.unreachable)
    if (err.exitCode === exitCodes.failed)
      Object.defineProperty(err, 'exitCode', { value: exitCodes.unreachable })
    throw err
  }
  if (changes > 0) throw afterAnswer('', exitCodes.failed)
}

/** Plans the documents and prints the diff of each object that would change: answers how many. */
async function showDiff(deps: Deps, opts: { file: string; prune?: boolean }): Promise<number> {
  const { body, sources } = await bodyOf(deps, opts.file, { prune: opts.prune ?? false })
  const plan = await deps
    .client()
    .post<ConfigPlan>('/config/plan', body)
    .catch((err: unknown) => {
      throw withSource(err, sources)
    })
  const changes = plan.changes.filter((c) => c.action !== 'unchanged')
  if (deps.out.json) printJson(deps.out, plan)
  else
    for (const change of changes) {
      const name = objectName(change)
      const before = change.current ? toYaml(change.current) : ''
      const after = change.desired ? toYaml(change.desired) : ''
      deps.out.write(`--- ${change.current ? `live/${name}` : '/dev/null'}\n`)
      deps.out.write(`+++ ${change.desired ? `desired/${name}` : '/dev/null'}\n`)
      const text = unifiedDiff(before, after)
      if (text) deps.out.write(safeText(text, { multiline: true }))
      // A secret's new value shows in no line of the document: say so.
      for (const field of change.fields)
        if (field.path.endsWith('(value)'))
          deps.out.write(`# ${safeText(field.path)}: ${safeText(String(field.new))}\n`)
    }
  return changes.length
}

const verbs: Record<ConfigChange['action'], string> = {
  create: 'created',
  update: 'configured',
  delete: 'deleted',
  unchanged: 'unchanged',
}

export async function apply(
  deps: Deps,
  opts: { file: string; prune?: boolean; dryRun?: boolean },
): Promise<void> {
  const { body, sources } = await bodyOf(deps, opts.file, {
    prune: opts.prune ?? false,
    dryRun: opts.dryRun ?? false,
  })
  const answer = await deps
    .client()
    .post<ConfigApplied>('/config/apply', body)
    .catch((err: unknown) => {
      throw withSource(err, sources)
    })
  show(deps.out, answer, () => {
    for (const change of answer.changes)
      deps.out.write(
        `${objectName(change)} ${verbs[change.action]}${answer.dryRun && change.action !== 'unchanged' ? ' (dry run)' : ''}\n`,
      )
  })
}

export function registerConfig(program: Command, makeDeps: MakeDeps): void {
  const config = program.command('config').description(about.config)
  examples(
    config
      .command('export')
      .description(
        "write the enterprise's documents to DIR, one file per object (tasks/weekly-report.yaml, ...); an unchanged enterprise exports the same bytes, and files of objects now gone are removed",
      )
      .argument('<dir>', 'the directory to write (made if missing)')
      .action(actionOf(makeDeps, configExport)),
    'osctl config export ./enterprise',
  )
}

export function registerDiff(program: Command, makeDeps: MakeDeps): void {
  examples(
    program
      .command('diff')
      .description(about.diff)
      .requiredOption('-f, --file <path>', 'a YAML file, a directory of them, or - for stdin')
      .option('--prune', 'also show the objects that apply --prune would delete')
      .action(
        actionOf(makeDeps, (deps, opts: { file: string; prune?: boolean }) => diff(deps, opts)),
      ),
    'osctl diff -f ./enterprise',
    'osctl diff -f ./enterprise --prune || echo "changes pending"',
  )
}

export function registerApply(program: Command, makeDeps: MakeDeps): void {
  examples(
    program
      .command('apply')
      .description(about.apply)
      .requiredOption('-f, --file <path>', 'a YAML file, a directory of them, or - for stdin')
      .option('--prune', "delete the objects of the documents' kinds that no document names")
      .option('--dry-run', 'check and apply everything, then roll it back')
      .action(
        actionOf(makeDeps, (deps, opts: { file: string; prune?: boolean; dryRun?: boolean }) =>
          apply(deps, opts),
        ),
      ),
    'osctl apply -f ./enterprise',
    'GITHUB_TOKEN=... osctl apply -f ./enterprise --prune --dry-run',
  )
}

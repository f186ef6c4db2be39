import { execFile } from 'node:child_process'
import { readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { projectRoot } from '../../shared/paths.js'

// What a process of osd or osctl loads, for what it must not (the tracing SDK with tracing off, the
// HTTP layer in an engine, the profile store in a pipeline's command). bin/osd and bin/osctl start
// dist/bundle (scripts/bundle.mjs), so a chunk read counts as the files it holds (its meta.json).

/** What esbuild wrote of dist/bundle: each output's entry and the files it holds. */
interface BundleMeta {
  outputs: Record<string, { entryPoint?: string; inputs: Record<string, unknown> }>
}

const bundleMeta = async () =>
  JSON.parse(await readFile(join(projectRoot, 'dist/bundle/meta.json'), 'utf8')) as BundleMeta

/**
 * Node's arguments (`--import` of a module hook) that make a process write, as it exits, the files it
 * loaded to `file` (JSON): ES modules by a loader hook, CommonJS ones from require's cache. Read them
 * with `filesLoaded`.
 */
export function recordingLoads(file: string): string[] {
  const hook = `data:text/javascript,${encodeURIComponent(`
    import { register, createRequire } from 'node:module'
    import { writeFileSync } from 'node:fs'
    const { port1, port2 } = new MessageChannel()
    const loaded = new Set()
    port1.on('message', (url) => loaded.add(url)); port1.unref()
    register('data:text/javascript,' + encodeURIComponent(
      'let port; export function initialize(d) { port = d.port } ' +
      'export async function load(url, context, next) { port.postMessage(url); return next(url, context) }'),
      { parentURL: import.meta.url, data: { port: port2 }, transferList: [port2] })
    process.on('exit', () => writeFileSync(${JSON.stringify(file)},
      JSON.stringify([...loaded, ...Object.keys(createRequire('file:///').cache)])))`)}`
  return ['--import', hook]
}

/**
 * The files a process that ran with `recordingLoads(file)` loaded: a chunk of dist/bundle as the
 * files it holds (dist/server/..., node_modules/...), absolute paths.
 */
export async function filesLoaded(file: string): Promise<string[]> {
  const meta = await bundleMeta()
  const outputs = new Map(
    Object.entries(meta.outputs).map(([output, { inputs }]) => [
      resolve(projectRoot, output),
      Object.keys(inputs).map((input) => resolve(projectRoot, input)),
    ]),
  )
  const read = JSON.parse(await readFile(file, 'utf8')) as string[]
  return read
    .map((f) => (f.startsWith('file:') ? fileURLToPath(f) : f))
    .flatMap((f) => outputs.get(f) ?? [f])
}

/**
 * The files a fresh Node process reads when it loads `module` (a module tsc built, in dist/: say
 * `dist/server/serve.js`) as osd and osctl load it, from dist/bundle: the chunk it starts and every
 * chunk that chunk imports, and the packages kept out of the bundle. `module` must start a chunk: an
 * entry (dist/server/main.js, dist/cli/main.js) or a module some code import()s. `args` are the
 * process's arguments (for an entry: `--version`).
 */
export async function modulesReadBy(
  module: string,
  env: Record<string, string | undefined> = {},
  args: string[] = [],
): Promise<string[]> {
  const started = Object.entries((await bundleMeta()).outputs).find(
    ([, output]) => output.entryPoint === module,
  )
  if (!started)
    throw new Error(`${module} starts no chunk of dist/bundle: an entry, or import() it`)
  const chunk = join(projectRoot, started[0])
  const record = join(tmpdir(), `osd-loaded-${process.pid}-${Math.random().toString(36).slice(2)}`)
  const script = `
    process.argv = [process.execPath, ${JSON.stringify(chunk)}, ...${JSON.stringify(args)}]
    await import(${JSON.stringify(pathToFileURL(chunk).href)})
    await new Promise((r) => setTimeout(r, 100))
    process.exit(0)`
  await promisify(execFile)(
    process.execPath,
    [...recordingLoads(record), '--input-type=module', '-e', script],
    { cwd: projectRoot, env: { ...process.env, ...env } },
  )
  try {
    return await filesLoaded(record)
  } finally {
    await rm(record, { force: true })
  }
}

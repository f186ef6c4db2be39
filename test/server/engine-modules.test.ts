import { join } from 'node:path'
import { expect, it } from 'vitest'
import { projectRoot } from '../../shared/paths.js'
import { modulesReadBy } from '../helpers/loaded-modules.js'

// An engine process (osd serve --role engine) serves no HTTP: the app, its routes with their schemas
// and Hono are loaded only by a process that listens (serve.ts listenHttp). They were about a quarter
// of the modules an engine read, 0.26 of its 1.33 CPU-seconds to start (issue 40).
it('leaves the HTTP app, its routes and Hono unread until osd listens', async () => {
  const files = await modulesReadBy(join(projectRoot, 'dist/server/serve.js'))
  expect(files.some((f) => f.endsWith('/dist/server/engine/index.js'))).toBe(true)
  expect(
    files.filter((f) =>
      /\/dist\/server\/(http\/app|routes\/)|node_modules\/(hono|@hono)\//.test(f),
    ),
  ).toEqual([])
})

import { randomBytes } from 'node:crypto'
import { expect, it, vi } from 'vitest'
import { z } from 'zod'
import { loadConfig } from '../../../server/config.js'
import { createSealer } from '../../../server/crypto.js'
import { createSql } from '../../../server/db/sql.js'
import { createApp } from '../../../server/http/app.js'
import { openApiDocument } from '../../../server/http/document.js'
import { silentLog } from '../../helpers/app.js'

// A route file answering a schema registered under a component id that another schema already holds:
// the organisation routes gain an answer named Gate that is not the gate of shared/schemas/gates.ts, as
// a task's gate rule once was.
vi.mock('../../../server/routes/orgs.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../../server/routes/orgs.js')>()
  const { route } = await import('../../../server/http/router.js')
  const Rule = z.object({ tool: z.string(), owner: z.string() }).meta({ id: 'Gate' })
  return {
    orgRoutes: (deps: Parameters<typeof original.orgRoutes>[0]) => {
      const app = original.orgRoutes(deps)
      route(
        app,
        {
          operationId: 'listRules',
          method: 'get',
          path: '/rules',
          summary: 'Rules',
          response: z.object({ rules: z.array(Rule) }),
        },
        async () => ({ rules: [] }),
      )
      return app
    },
  }
})

it('refuses to make the document of an app in which two schemas share a component id, naming both', async () => {
  // Building the app reads no row: a database that does not answer is enough.
  const url = 'postgres://osd:x@127.0.0.1:1/none'
  const sql = createSql(url, { max: 1 })
  try {
    const app = createApp({
      sql,
      config: loadConfig({}, { DATABASE_URL: url }),
      log: silentLog,
      sealer: createSealer(randomBytes(32)),
    })
    // The organisation routes are mounted before the runs routes, whose detail is the first to answer a gate.
    expect(openApiDocument(app, 'test')).toThrow(
      'component id Gate names two schemas: {tool, owner} in GET /v1/orgs/rules answer 200.rules[], and {id, kind, status, tool, arguments, ...} in GET /v1/runs/{id} answer 200.gates[]',
    )
  } finally {
    await sql.end({ timeout: 0 })
  }
})

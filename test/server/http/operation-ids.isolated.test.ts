import { randomBytes } from 'node:crypto'
import { expect, it, vi } from 'vitest'
import { loadConfig } from '../../../server/config.js'
import { createSealer } from '../../../server/crypto.js'
import { createSql } from '../../../server/db/sql.js'
import { createApp } from '../../../server/http/app.js'
import { silentLog } from '../../helpers/app.js'

// A route file declaring an operationId that another route file already uses: the organisation routes
// gain a second operation named getRun (server/routes/runs.ts declares the first).
vi.mock('../../../server/routes/orgs.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../../server/routes/orgs.js')>()
  const { route } = await import('../../../server/http/router.js')
  return {
    orgRoutes: (deps: Parameters<typeof original.orgRoutes>[0]) => {
      const app = original.orgRoutes(deps)
      route(
        app,
        { operationId: 'getRun', method: 'get', path: '/again', summary: 'A second getRun' },
        async () => undefined,
      )
      return app
    },
  }
})

it('refuses to build an app in which two routes share an operationId, naming both', async () => {
  // Building the app reads no row: a database that does not answer is enough.
  const url = 'postgres://osd:x@127.0.0.1:1/none'
  const sql = createSql(url, { max: 1 })
  try {
    const build = () =>
      createApp({
        sql,
        config: loadConfig({}, { DATABASE_URL: url }),
        log: silentLog,
        sealer: createSealer(randomBytes(32)),
      })
    expect(build).toThrow(
      'operationId getRun is declared twice: GET /v1/orgs/again and GET /v1/runs/{id}',
    )
  } finally {
    await sql.end({ timeout: 0 })
  }
})

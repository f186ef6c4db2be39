import { Health } from '../../shared/schemas/common.js'
import type { AppDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/** GET /v1/health without a token (spec: Routes without a token; Versioning 2). */
export function healthRoutes({ sql, config }: AppDeps) {
  const app = createRouter()
  route(
    app,
    {
      method: 'get',
      path: '/health',
      summary: 'Whether the API is up, and the version it runs; 503 when the database does not answer',
      response: Health,
      public: true,
    },
    async (c) => {
      const up = await databaseAnswers(sql, 2000)
      const body: Health = { status: up ? 'ok' : 'degraded', version: config.version }
      return up ? body : c.json(body, 503)
    },
  )
  return app
}

async function databaseAnswers(sql: AppDeps['sql'], timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const query = sql`select 1`
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs)
  })
  try {
    return await Promise.race([query.then(() => true as const), timeout])
  } catch {
    return false
  } finally {
    clearTimeout(timer)
    query.cancel()
  }
}

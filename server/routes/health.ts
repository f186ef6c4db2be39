import { Health, Probe } from '../../shared/schemas/common.js'
import type { AppDeps } from '../http/context.js'
import { databaseRetryAfterSeconds } from '../http/errors.js'
import { createRouter, route } from '../http/router.js'

/**
 * GET /v1/health without a token (spec: Routes without a token; Versioning 2), and the probes of an
 * orchestrator beside it (DESIGN 13): live while the process answers at all, ready while it can serve.
 */
export function healthRoutes({ sql, config, shutdown }: AppDeps) {
  const app = createRouter()
  // A database that answered less than a second ago is taken to be up, so a load balancer's polling
  // costs no query per call; a failed probe is never remembered, so an outage shows at once.
  let answeredAt = -Infinity
  route(
    app,
    {
      operationId: 'getHealth',
      method: 'get',
      path: '/health',
      summary:
        'Whether the API is up, and the version it runs; 503 when the database does not answer',
      response: Health,
      otherAnswers: {
        503: { description: 'degraded: the database does not answer', schema: Health },
      },
      public: true,
    },
    async (c) => {
      let up = performance.now() - answeredAt < 1000
      if (!up) {
        up = await databaseAnswers(sql, 2000)
        if (up) answeredAt = performance.now()
      }
      const body: Health = { status: up ? 'ok' : 'degraded', version: config.version }
      if (up) return body
      c.header('Retry-After', String(databaseRetryAfterSeconds))
      return c.json(body, 503)
    },
  )
  // Liveness: the process answers. Nothing is asked of the database, so an outage of it never gets
  // the process restarted (a restart would not bring the database back).
  route(
    app,
    {
      operationId: 'getLiveness',
      method: 'get',
      path: '/health/live',
      summary: 'Liveness probe: 200 while the process runs and answers',
      response: Probe,
      public: true,
    },
    async () => ({ status: 'ok' }) as const,
  )
  // Readiness: the database answers. Migrations are applied before osd listens at all (serve.ts), so
  // a process that answers here has them. Asked of the database at every probe, unlike /health's
  // second of grace: a probe comes every few seconds, and should see an outage the moment it starts.
  route(
    app,
    {
      operationId: 'getReadiness',
      method: 'get',
      path: '/health/ready',
      summary:
        'Readiness probe: 200 once migrations are applied and the database answers; 503 with Retry-After while it does not, or while the daemon stops',
      response: Probe,
      otherAnswers: {
        503: {
          description: 'not ready: the database does not answer, or osd is stopping',
          schema: Probe,
        },
      },
      public: true,
    },
    async (c) => {
      const reason = shutdown?.aborted
        ? 'osd is stopping'
        : (await databaseAnswers(sql, 2000))
          ? undefined
          : 'the database does not answer'
      if (!reason) return { status: 'ok' } as const
      c.header('Retry-After', String(databaseRetryAfterSeconds))
      return c.json({ status: 'unavailable', reason } satisfies Probe, 503)
    },
  )
  return app
}

async function databaseAnswers(sql: AppDeps['sql'], timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const query = sql`select 1`
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs)
  })
  const outcome = await Promise.race([
    query.then(
      () => 'ok' as const,
      () => 'failed' as const,
    ),
    timeout,
  ])
  clearTimeout(timer)
  // Cancelling a query that already finished would leave a promise pending forever: only a late one.
  if (outcome === 'timeout')
    void (query.cancel() as unknown as Promise<void>)?.catch(() => undefined)
  return outcome === 'ok'
}

import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import { RunBulkCount, RunBulkOperation, RunBulkRequest } from '../../shared/schemas/run-bulk.js'
import { countBulkMatches, getBulkOperation, startBulkOperation } from '../domain/runs/index.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/**
 * Acting on runs by a filter (issue 50: Act on a filter; docs/api-in-brief.md), under /v1/runs: its
 * scopes are the runs' (runs:write to act, as cancel and retry of one run need; runs:read to
 * follow).
 */
export function runBulkRoutes({ sql, config }: RouteDeps) {
  const app = createRouter()

  route(
    app,
    {
      operationId: 'startRunBulkOperation',
      method: 'post',
      path: '/',
      summary:
        'Cancel or retry every run of the enterprise a filter matches, in batches by the engines; dryRun answers 200 with the count and does nothing; the same idempotencyKey answers the same operation',
      description:
        'One operation acts on at most maxRuns runs (OSD_BULK_MAX_RUNS, 100,000 unless configured; the dry run answers it): a filter matching more is 400 bulk_too_many_runs, and nothing is made.',
      body: RunBulkRequest,
      status: 202,
      response: RunBulkOperation,
      otherAnswers: { 200: { description: 'dryRun: the count matched', schema: RunBulkCount } },
      errors: ['bulk_idempotency_key_reused', 'bulk_too_many_runs'],
    },
    async (c, { body }) => {
      const { enterpriseId, actor } = c.var.caller
      const { bulkMaxRuns } = config
      if (body.dryRun)
        return c.json(await countBulkMatches(sql, enterpriseId, body, bulkMaxRuns), 200)
      return startBulkOperation(sql, enterpriseId, actor, body, bulkMaxRuns)
    },
  )

  route(
    app,
    {
      operationId: 'getRunBulkOperation',
      method: 'get',
      path: '/{id}',
      summary: 'A bulk operation as it stands: matched, done, failed, skipped, its status',
      params: z.object({ id: Uuid }),
      notFound: 'bulk_operation_not_found',
      response: RunBulkOperation,
    },
    async (c, { params }) => getBulkOperation(sql, c.var.caller.enterpriseId, params.id),
  )

  return app
}

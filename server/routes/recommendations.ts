import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import {
  Recommendation,
  RecommendationDecision,
  RecommendationDetail,
  RecommendationListQuery,
} from '../../shared/schemas/recommendations.js'
import {
  decideRecommendation,
  getRecommendation,
  listRecommendations,
} from '../domain/learning/index.js'
import type { AppContext, RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/**
 * Recommendations (spec: Endpoints Recommendations; DESIGN 10): changes to tasks that os-improve runs
 * proposed, for a person to approve or decline.
 */
export function recommendationRoutes({ sql, config }: RouteDeps) {
  const app = createRouter()
  const enterprise = (c: AppContext) => c.var.caller.enterpriseId
  const params = z.object({ id: Uuid })

  route(
    app,
    {
      operationId: 'listRecommendations',
      method: 'get',
      path: '/',
      summary:
        'Recommendations waiting, newest first; taskId narrows; view=decided gives those decided in the last 60 days',
      query: RecommendationListQuery,
      response: z.array(Recommendation),
    },
    async (c, { query }) => listRecommendations(sql, enterprise(c), query),
  )

  route(
    app,
    {
      operationId: 'getRecommendation',
      method: 'get',
      path: '/{id}',
      summary:
        'One recommendation in full, with its changes against the base version field by field and a line diff of the skill',
      params,
      notFound: 'recommendation_not_found',
      response: RecommendationDetail,
    },
    async (c, { params }) => getRecommendation(sql, enterprise(c), params.id),
  )

  route(
    app,
    {
      operationId: 'decideRecommendation',
      method: 'post',
      path: '/{id}/decision',
      summary:
        'Approve (publish the changes as a new version on the base version and start a run on it) or decline (reason required)',
      description:
        'Both answer 201 with the decided recommendation; an approval carries versionId and runId. A decided recommendation answers 409 already_decided, unless the same caller repeats the same idempotencyKey: then the first decision answers again and nothing more is published or started.',
      params,
      notFound: 'recommendation_not_found',
      body: RecommendationDecision,
      status: 201,
      response: Recommendation,
      errors: [
        'already_decided',
        'task_not_found',
        'task_not_runnable',
        'task_version_conflict',
        'recommendation_not_applicable',
        // The version is checked when approved: a must-gate list may have grown since the proposal.
        'invalid_task_definition',
        'gate_required_for_tool',
        // An evidence run's input is read back from the archive once the retention pass moved it.
        'archive_unavailable',
      ],
    },
    async (c, { params, body }) =>
      (
        await decideRecommendation(
          sql,
          config.archiveDir,
          enterprise(c),
          params.id,
          body,
          c.var.caller.actor,
        )
      ).recommendation,
  )

  return app
}

import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import {
  DismissInput,
  MemoryNote,
  MemoryPageQuery,
  MemoryTrainInput,
  NoteListQuery,
  NotePage,
  NotePatch,
  noteSorts,
  RateInput,
  RecallHealth,
  ResolveInput,
  ReviewDecision,
  ReviewHistoryPage,
  ReviewPage,
} from '../../shared/schemas/memory.js'
import { Run } from '../../shared/schemas/runs.js'
import { readPage } from '../db/paging.js'
import { toRun } from '../domain/runs/index.js'
import {
  dismissReview,
  getNote,
  listNotes,
  listReview,
  listReviewHistory,
  rateNote,
  recallHealth,
  resolveReview,
  setValidUntil,
  startTraining,
  tombstoneNote,
} from '../domain/learning/index.js'
import type { AppContext, RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/** Who decides or writes: the caller's token. */
export const writer = (c: AppContext) => c.var.caller.actor

const noSort = ['createdAt'] as const

/**
 * Memory (spec: Endpoints Memory; DESIGN 10): notes, their search, ratings, the review queue and recall
 * health. The fixed paths come before /{id}, which would take them for a note's id.
 */
export function memoryRoutes({ sql }: RouteDeps) {
  const app = createRouter()
  const enterprise = (c: AppContext) => c.var.caller.enterpriseId

  route(
    app,
    {
      operationId: 'listMemoryNotes',
      method: 'get',
      path: '/',
      summary:
        'Active notes that hold, newest first or, with q, by relevance; sort=impact (lift) or recalls; filters layer, taskId, teamId, status, kind, expired',
      description:
        'Each note carries its impact: of the finished runs that recalled it, how many succeeded and failed, against the success rate of the runs of the same tasks over the same period that did not recall it (baseRate); lift = successRate - baseRate, null while either side has fewer than 5 runs. sort=impact orders by lift, notes without one last. q forgives typos where the database has pg_trgm: a word no note holds is looked for as the most similar words notes hold. expired=true lists the active notes past their validUntil instead, which are not recalled.',
      query: NoteListQuery,
      response: NotePage,
    },
    async (c, { query }) => listNotes(sql, enterprise(c), query, readPage(query, noteSorts)),
  )

  route(
    app,
    {
      operationId: 'trainMemory',
      method: 'post',
      path: '/train',
      summary:
        'Start an os-train-memory run of a layer (team with teamId, or enterprise); 202 with the run',
      description:
        'The run is an ordinary llm run of the built-in os-train-memory task (origin api): journaled, priced, blocked without a key, cancellable. While a training of the same layer (and team) is under way, that run answers and nothing is started. The layer is recorded on the run here, and only here: a run of os-train-memory started any other way (POST /v1/tasks/{id}/runs, a webhook, a schedule, a retry) writes no note, whatever its input names.',
      body: MemoryTrainInput,
      status: 202,
      response: Run,
      errors: ['team_not_found', 'task_not_found', 'task_not_runnable'],
    },
    async (c, { body }) => toRun((await startTraining(sql, enterprise(c), body)).run),
  )

  route(
    app,
    {
      operationId: 'getMemoryRecallHealth',
      method: 'get',
      path: '/recall-health',
      summary: 'Recalls tried, succeeded and failed in the last 24 hours, by runs and by chats',
      response: RecallHealth,
    },
    async (c) => recallHealth(sql, enterprise(c)),
  )

  route(
    app,
    {
      operationId: 'listMemoryReview',
      method: 'get',
      path: '/review',
      summary:
        'The review queue: open conflicts, notes rated down and notes of low impact, newest first',
      description:
        'A low_impact item opens when a note recalled by at least 20 finished runs has a lift of -0.2 or lower (one open per note; after a decision, again only once 20 more runs recalled it): tombstone the note, correct it (resolve with the correction), or dismiss the item.',
      query: MemoryPageQuery,
      response: ReviewPage,
    },
    async (c, { query }) => listReview(sql, enterprise(c), readPage(query, noSort)),
  )

  route(
    app,
    {
      operationId: 'listMemoryReviewHistory',
      method: 'get',
      path: '/review/history',
      summary: 'Every review decision, newest first: who, when and why',
      query: MemoryPageQuery,
      response: ReviewHistoryPage,
    },
    async (c, { query }) => listReviewHistory(sql, enterprise(c), readPage(query, noSort)),
  )

  const item = { params: z.object({ id: Uuid }), notFound: 'review_item_not_found' } as const
  route(
    app,
    {
      ...item,
      operationId: 'resolveMemoryReview',
      method: 'post',
      path: '/review/{id}/resolve',
      summary:
        'Resolve with correctionId, a note correcting the reviewed one: it applies and the reviewed note is superseded',
      body: ResolveInput,
      response: ReviewDecision,
      errors: ['note_not_found', 'note_not_active', 'review_item_decided'],
    },
    async (c, { params, body }) =>
      resolveReview(sql, enterprise(c), params.id, { ...body, by: writer(c) }),
  )

  route(
    app,
    {
      ...item,
      operationId: 'dismissMemoryReview',
      method: 'post',
      path: '/review/{id}/dismiss',
      summary: "Dismiss: the note stands; a conflict's proposed correction is dropped",
      body: DismissInput,
      response: ReviewDecision,
      errors: ['review_item_decided'],
    },
    async (c, { params, body }) =>
      dismissReview(sql, enterprise(c), params.id, { ...body, by: writer(c) }),
  )

  const note = { params: z.object({ id: Uuid }), notFound: 'note_not_found' } as const
  route(
    app,
    {
      ...note,
      operationId: 'getMemoryNote',
      method: 'get',
      path: '/{id}',
      summary:
        'A note with its evidence, its impact and whether it expired; a tombstoned note is never answered again',
      response: MemoryNote,
    },
    async (c, { params }) => getNote(sql, enterprise(c), params.id),
  )

  route(
    app,
    {
      ...note,
      operationId: 'updateMemoryNote',
      method: 'patch',
      path: '/{id}',
      summary:
        'Extend an active note, expired or not: validUntil a time in the future, or null to let it hold with no end',
      description:
        'validUntil not an ISO 8601 time with a zone, or not in the future, is 400. A note that is not active (superseded, proposed) is 409 note_not_active.',
      body: NotePatch,
      response: MemoryNote,
      errors: ['note_not_active'],
    },
    async (c, { params, body }) => setValidUntil(sql, enterprise(c), params.id, body.validUntil),
  )

  route(
    app,
    {
      ...note,
      operationId: 'tombstoneMemoryNote',
      method: 'post',
      path: '/{id}/tombstone',
      summary: 'Exclude the note from every future answer; repeating it changes nothing',
      status: 204,
    },
    async (c, { params }) => tombstoneNote(sql, enterprise(c), params.id, writer(c)),
  )

  route(
    app,
    {
      ...note,
      operationId: 'rateMemoryNote',
      method: 'post',
      path: '/{id}/rate',
      summary: 'Rate an active note up or down, with an optional reason; down opens a review item',
      body: RateInput,
      response: MemoryNote,
      errors: ['note_not_active'],
    },
    async (c, { params, body }) =>
      rateNote(sql, enterprise(c), params.id, { ...body, by: writer(c) }),
  )

  return app
}

import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import {
  DismissInput,
  MemoryNote,
  MemoryPageQuery,
  MemoryTrainInput,
  NoteListQuery,
  NotePage,
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
        'Active notes, newest first or, with q, by relevance; filters layer, taskId, teamId, status, kind',
      query: NoteListQuery,
      response: NotePage,
    },
    async (c, { query }) => listNotes(sql, enterprise(c), query, readPage(query, noSort)),
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
        'The run is an ordinary llm run of the built-in os-train-memory task (origin api): journaled, priced, blocked without a key, cancellable. While a training of the same layer (and team) is under way, that run answers and nothing is started.',
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
      summary: 'The review queue: open conflicts and notes rated down, newest first',
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
      summary: 'A note and its evidence; a tombstoned note is never answered again',
      response: MemoryNote,
    },
    async (c, { params }) => getNote(sql, enterprise(c), params.id),
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

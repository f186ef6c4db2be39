import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import {
  Schedule,
  ScheduleInput,
  TaskCopy,
  TaskDefinition,
  TaskListQuery,
  TaskPage,
  TaskRead,
  TaskVersionRead,
  TaskWorkflow,
  VersionPublish,
  VersionPublished,
  taskSorts,
} from '../../shared/schemas/tasks.js'
import { Run, RunInput } from '../../shared/schemas/runs.js'
import {
  MemoryAsk,
  MemoryAskQuery,
  MemoryNote,
  TaskMemory,
  TaskNoteInput,
  TaskTrainInput,
} from '../../shared/schemas/memory.js'
import {
  askTaskMemory,
  listTaskRecommendations,
  taskMemory,
  writeTaskNote,
} from '../domain/learning/index.js'
import { Recommendation, TaskRecommendationQuery } from '../../shared/schemas/recommendations.js'
import { readPage } from '../db/paging.js'
import { pauseTask, resumeTask, toRun } from '../domain/runs/index.js'
import { PauseInput, ResumeInput } from '../../shared/schemas/pauses.js'
import { requireOfferedModel } from '../domain/models/index.js'
import {
  clearTaskSchedule,
  copyTask,
  createTask,
  deleteTask,
  getVersion,
  getWorkflow,
  listTasks,
  listVersions,
  publishVersion,
  readTask,
  setTaskSchedule,
} from '../domain/tasks/index.js'
import { apiBaseOf, type AppContext, type RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'
import { traceParentOf } from '../traces/index.js'

const TaskParams = z.object({ id: Uuid })

/** Tasks, their versions and schedules (spec: Endpoints Tasks). */
export function taskRoutes(deps: RouteDeps) {
  const { sql, config, sealer, providers, starts } = deps
  const app = createRouter()
  const common = { notFound: 'task_not_found', params: TaskParams } as const
  // The address callers reach the API at, for the webhook URL of the read answer.
  const read = (c: AppContext, id: string) =>
    readTask(sql, c.var.caller.enterpriseId, id, apiBaseOf(deps))
  // An exact spend.model must be one a connected provider offers (spec: llm_model_not_in_catalogue).
  const checkModel = async (c: AppContext, spend: { model?: string } | null | undefined) => {
    if (spend?.model)
      await requireOfferedModel(
        sql,
        sealer,
        c.var.caller.enterpriseId,
        providers,
        spend.model,
        config.providerBOAuth,
      )
  }

  route(
    app,
    {
      operationId: 'listTasks',
      method: 'get',
      path: '/',
      summary: 'Tasks, paged; sort slug (default), name, kind, status, createdAt, updatedAt',
      query: TaskListQuery,
      response: TaskPage,
    },
    async (c, { query }) =>
      listTasks(sql, c.var.caller.enterpriseId, query, readPage(query, taskSorts)),
  )

  route(
    app,
    {
      operationId: 'createTask',
      method: 'post',
      path: '/',
      summary: 'Create a task and its first version; only name is required',
      body: TaskDefinition,
      status: 201,
      response: TaskRead,
      errors: [
        'invalid_name',
        'invalid_slug',
        'task_slug_taken',
        'team_not_found',
        'assignee_member_removed',
        'serialize_on_invalid',
        'skillMd_required',
        'invalid_task_definition',
        'gate_required_for_tool',
        'llm_model_not_in_catalogue',
      ],
    },
    async (c, { body }) => {
      await checkModel(c, body.spend)
      return read(c, await createTask(sql, c.var.caller.enterpriseId, body))
    },
  )

  route(
    app,
    {
      ...common,
      operationId: 'getTask',
      method: 'get',
      path: '/{id}',
      summary: 'The task read answer',
      response: TaskRead,
    },
    async (c, { params }) => read(c, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'deleteTask',
      method: 'delete',
      path: '/{id}',
      summary:
        'Delete the task and all its versions; its runs are kept; refused while a run is under way',
      status: 204,
      errors: ['task_busy', 'os_task_immutable'],
    },
    async (c, { params }) => deleteTask(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'copyTask',
      method: 'post',
      path: '/{id}/copy',
      summary: "An independent copy on a team; assigneeRole defaults to the original's",
      body: TaskCopy,
      status: 201,
      response: TaskRead,
      // The copy is checked as a new task is: the enterprise's rules may have changed since the original.
      errors: [
        'team_not_found',
        'task_slug_taken',
        'invalid_slug',
        'assignee_member_removed',
        'invalid_task_definition',
        'gate_required_for_tool',
      ],
    },
    async (c, { params, body }) =>
      read(c, await copyTask(sql, c.var.caller.enterpriseId, params.id, body)),
  )

  route(
    app,
    {
      ...common,
      operationId: 'listTaskVersions',
      method: 'get',
      path: '/{id}/versions',
      summary: 'Every version, newest first',
      response: z.array(TaskVersionRead),
    },
    async (c, { params }) => listVersions(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'getTaskVersion',
      method: 'get',
      path: '/{id}/versions/{versionId}',
      summary: 'One version as saved, with its skill, run count and whether it is current',
      params: z.object({ id: Uuid, versionId: Uuid }),
      response: TaskVersionRead,
      errors: ['version_not_found'],
    },
    async (c, { params }) =>
      getVersion(sql, c.var.caller.enterpriseId, params.id, params.versionId),
  )

  route(
    app,
    {
      ...common,
      operationId: 'publishTaskVersion',
      method: 'post',
      path: '/{id}/versions',
      summary:
        'Publish a version: send only changed fields (null clears inputs, workspace, successors); baseVersionId guards',
      body: VersionPublish,
      status: 201,
      response: VersionPublished,
      errors: [
        'task_version_conflict',
        'task_slug_taken',
        'team_not_found',
        'skillMd_required',
        'invalid_task_definition',
        'gate_required_for_tool',
        'task_definition_read_only',
        'os_task_immutable',
        'llm_model_not_in_catalogue',
      ],
    },
    async (c, { params, body }) => {
      await checkModel(c, body.spend)
      return publishVersion(sql, c.var.caller.enterpriseId, params.id, body, {
        by: c.var.caller.actor,
      })
    },
  )

  route(
    app,
    {
      ...common,
      operationId: 'getTaskWorkflow',
      method: 'get',
      path: '/{id}/workflow',
      summary: 'The current version and skill only',
      response: TaskWorkflow,
    },
    async (c, { params }) => getWorkflow(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'setTaskSchedule',
      method: 'put',
      path: '/{id}/schedule',
      summary: "Set the schedule: a 5-field cron, an IANA time zone (default UTC), the runs' input",
      body: ScheduleInput,
      response: Schedule,
      errors: ['os_task_immutable'],
    },
    async (c, { params, body }) => setTaskSchedule(sql, c.var.caller.enterpriseId, params.id, body),
  )

  route(
    app,
    {
      ...common,
      operationId: 'deleteTaskSchedule',
      method: 'delete',
      path: '/{id}/schedule',
      summary: 'Remove the schedule',
      status: 204,
      errors: ['os_task_immutable'],
    },
    async (c, { params }) => clearTaskSchedule(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'startTaskRun',
      method: 'post',
      path: '/{id}/runs',
      summary: "Start a run: the body is the run's input, stored as sent; 201 queued",
      description:
        'Refused 409 overlap when the lane has a run under way (a run waiting at a gate does not count) and 409 member_busy when every holder of the role is busy; both refusals are recorded as skipped_overlap runs. While the task or the enterprise is paused the start is accepted and waits: 201 pending, with `paused` saying why.',
      body: RunInput,
      status: 201,
      response: Run,
      errors: ['task_not_runnable', 'overlap', 'member_busy'],
    },
    async (c, { params, body }) => {
      const { run, refusal } = await starts.start({
        enterpriseId: c.var.caller.enterpriseId,
        task: { id: params.id },
        input: body,
        origin: 'api',
        startedBy: c.var.caller.actor,
        // The request's span, whose parent is the caller's traceparent (issue 49).
        traceParent: traceParentOf(c.var.trace),
      })
      if (refusal) throw refusal
      return toRun(run)
    },
  )

  // Pause and resume (issue 50; docs/usage.md#pause). Both are idempotent: a second pause keeps
  // the first (its time, who and why) and a resume of a task not paused changes nothing; both answer
  // the task, whose `paused` says what is in force.
  route(
    app,
    {
      ...common,
      operationId: 'pauseTask',
      method: 'post',
      path: '/{id}/pause',
      summary:
        'Pause the task: its starts are accepted and wait pending, its runs under way stop after their current step, until the resume (beyond the spec)',
      description:
        'Idempotent: pausing a paused task changes nothing and answers the pause in force (the first reason stands). Recorded with who paused and why; task.paused in the event feed.',
      body: PauseInput,
      response: TaskRead,
    },
    async (c, { params, body }) => {
      const { enterpriseId, actor } = c.var.caller
      await pauseTask(sql, enterpriseId, params.id, { by: actor, reason: body.reason })
      return read(c, params.id)
    },
  )

  route(
    app,
    {
      ...common,
      operationId: 'resumeTask',
      method: 'post',
      path: '/{id}/resume',
      summary: "End the task's pause: its waiting runs go on in their order (beyond the spec)",
      description:
        'Idempotent: resuming a task that is not paused changes nothing. task.resumed in the event feed, with who resumed it.',
      body: ResumeInput,
      response: TaskRead,
    },
    async (c, { params, body }) => {
      const { enterpriseId, actor } = c.var.caller
      await resumeTask(sql, enterpriseId, params.id, { by: actor, reason: body.reason })
      return read(c, params.id)
    },
  )

  // Memory from the task's side (spec: /v1/tasks/{id}/memory...; DESIGN 10). The caller's token writes.
  route(
    app,
    {
      ...common,
      operationId: 'listTaskMemory',
      method: 'get',
      path: '/{id}/memory',
      summary: "The task's notes and its training grants (the layers it reads and may write)",
      response: TaskMemory,
    },
    async (c, { params }) => taskMemory(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'addTaskMemoryNote',
      method: 'post',
      path: '/{id}/memory',
      summary:
        "A person's note at the task layer, 1 to 4,000 characters; with correctsId, a correction of one of the task's notes, applied at once",
      description:
        'A note that says nearly what an active note of the task says (trigram similarity >= 0.8 after case and white-space folding; without pg_trgm, equal after folding) is 409 note_duplicate with duplicateOf, that note: correct it instead. validUntil (in the future) makes the note stop being recalled then. The same idempotencyKey from the same caller answers the note it wrote first (409 note_idempotency_key_reused for another request).',
      body: TaskNoteInput,
      status: 201,
      response: MemoryNote,
      errors: [
        'note_not_found',
        'note_not_active',
        'note_duplicate',
        'note_idempotency_key_reused',
      ],
    },
    async (c, { params, body }) =>
      writeTaskNote(sql, c.var.caller.enterpriseId, params.id, {
        ...body,
        layer: 'task',
        createdBy: c.var.caller.actor,
      }),
  )

  route(
    app,
    {
      ...common,
      operationId: 'trainTaskMemory',
      method: 'post',
      path: '/{id}/memory/train',
      summary:
        "A person's note or correction at the task's team layer or the enterprise layer; a correction supersedes the note it corrects at once",
      description:
        'A task without a team cannot write the team layer (400). correctsId names a note of the same layer (the same team, or the enterprise). A near-duplicate of an active note of that layer is 409 note_duplicate with duplicateOf; validUntil and idempotencyKey as for a task note.',
      body: TaskTrainInput,
      status: 201,
      response: MemoryNote,
      errors: [
        'note_not_found',
        'note_not_active',
        'note_duplicate',
        'note_idempotency_key_reused',
      ],
    },
    async (c, { params, body }) =>
      writeTaskNote(sql, c.var.caller.enterpriseId, params.id, {
        ...body,
        createdBy: c.var.caller.actor,
      }),
  )

  route(
    app,
    {
      ...common,
      operationId: 'askTaskMemory',
      method: 'get',
      path: '/{id}/memory/ask',
      summary:
        "Exactly what a run of the task would recall for q (default: the task's goal): its own, its team's and the enterprise's active notes that hold, best first, with layer and score",
      description:
        'The score combines full-text rank with trigram similarity where the database has pg_trgm: a word of q no note holds is looked for as the most similar words notes hold (deplyo finds a note about deploys), ranked below the words as written.',
      query: MemoryAskQuery,
      response: MemoryAsk,
    },
    async (c, { params, query }) =>
      askTaskMemory(sql, c.var.caller.enterpriseId, params.id, query.q, query.limit),
  )

  route(
    app,
    {
      ...common,
      operationId: 'listTaskRecommendations',
      method: 'get',
      path: '/{id}/recommendations',
      summary:
        "The task's recommendations, newest first: those waiting and those decided in the last 60 days (view narrows: waiting, decided, all)",
      query: TaskRecommendationQuery,
      response: z.array(Recommendation),
    },
    async (c, { params, query }) =>
      listTaskRecommendations(sql, c.var.caller.enterpriseId, params.id, query.view),
  )

  return app
}

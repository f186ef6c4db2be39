import { ApiError } from '../../../../shared/errors.js'
import type { ScheduleInput, VersionPublish } from '../../../../shared/schemas/tasks.js'
import { cleanSlug } from '../../../../shared/slug.js'
import {
  clearTaskSchedule,
  createTask,
  deleteTask,
  publishVersion,
  setTaskSchedule,
  validCron,
  validTimeZone,
} from '../../tasks/index.js'
import { DocumentError, requireSlug, type Live, type Writer } from '../model.js'
import type { Kind } from './kind.js'

// Tasks (/v1/tasks, tasks:write), named by slug: the current version's definition and the schedule. A
// change publishes a new version (message "applied from config") through publishVersion, so the
// definition checks, a clone's read-only definition and the recommendations it declines are the API's
// own. The service's own tasks have no document.

export const configMessage = 'applied from config'

/** The fields of a task's spec that live in its version; the rest change the task itself. */
const versionFields = [
  'overlapPolicy',
  'goal',
  'metric',
  'guardrails',
  'tools',
  'gates',
  'inputs',
  'spend',
  'workspace',
  'successors',
  'skillMd',
] as const

function scheduleOf(spec: Record<string, unknown>): ScheduleInput | null {
  return spec.schedule as ScheduleInput | null
}

/** A value osd checks as it stores it, checked the same way: its ApiError said as the field's fault. */
function checked<T>(field: string, check: () => T): T {
  try {
    return check()
  } catch (err) {
    if (err instanceof ApiError) throw new DocumentError(field, err.message)
    throw err
  }
}

export const tasksKind: Kind = {
  kind: 'Task',
  resource: 'tasks',
  read(snapshot) {
    const teamSlug = new Map(snapshot.teams.map((t) => [t.id, t.slug]))
    return snapshot.tasks
      .filter((task) => task.origin !== 'builtin')
      .map((task): Live => {
        const d = task.definition
        const schedule = snapshot.schedules.get(task.id)
        return {
          kind: 'Task',
          name: task.slug,
          layer: null,
          id: task.id,
          revision: task.currentVersionId,
          spec: {
            name: task.name,
            team: (task.teamId && teamSlug.get(task.teamId)) ?? null,
            assigneeRole: task.assigneeRole,
            kind: task.kind,
            status: task.status,
            serializeOn: task.serializeOn,
            overlapPolicy: d.overlapPolicy,
            goal: d.goal,
            metric: d.metric,
            guardrails: d.guardrails,
            tools: d.tools,
            gates: d.gates,
            inputs: d.inputs,
            spend: d.spend,
            workspace: d.workspace,
            successors: d.successors,
            schedule: schedule ?? null,
            skillMd: d.skillMd,
          },
        }
      })
  },
  show(spec, name) {
    if (spec.skillMd !== `# ${name}`) return spec
    const { skillMd: _default, ...shown } = spec
    return shown
  },
  desire(doc, world, ctx) {
    requireSlug(doc.name)
    if (ctx.builtinTasks.has(doc.name))
      throw new DocumentError(
        'metadata.name',
        `${doc.name} is one of the service's own tasks, in every enterprise: it has no document`,
      )
    const spec = { ...doc.spec }
    if (spec.team !== null && !world.teams.has(spec.team as string))
      throw new DocumentError('spec.team', `no team "${spec.team}" here or among the documents`)
    // As createTask stores it: a role named by slug, cleaned; empty is none.
    spec.assigneeRole =
      spec.assigneeRole === null ? null : cleanSlug(spec.assigneeRole as string) || null
    spec.skillMd ??= `# ${doc.name}`
    if ((spec.skillMd as string).trim() === '')
      throw new DocumentError('spec.skillMd', 'a version needs its skill: it would be empty')
    const schedule = scheduleOf(spec)
    if (schedule)
      spec.schedule = {
        ...schedule,
        cron: checked('spec.schedule.cron', () => validCron(schedule.cron)),
        timezone: checked('spec.schedule.timezone', () => validTimeZone(schedule.timezone!)),
      }
    return spec
  },
  async create(w, doc, spec) {
    const definition = Object.fromEntries(versionFields.map((f) => [f, spec[f]]))
    const id = await createTask(
      w.db,
      w.ctx.enterpriseId,
      {
        ...definition,
        name: spec.name as string,
        slug: doc.name,
        teamId: teamIdOf(w, spec.team),
        assigneeRole: spec.assigneeRole as string | null,
        kind: spec.kind as 'llm',
        status: spec.status as 'active',
        serializeOn: spec.serializeOn as string[] | null,
      },
      { message: configMessage },
    )
    w.refs.tasks.set(doc.name, { id, builtin: false })
    const schedule = scheduleOf(spec)
    if (schedule) await setTaskSchedule(w.db, w.ctx.enterpriseId, id, schedule)
  },
  async update(w, live, spec, fields) {
    const body: Record<string, unknown> = {}
    for (const field of fields) {
      if (field === 'schedule') continue
      if (field === 'team') body.teamId = teamIdOf(w, spec.team)
      else body[field] = spec[field]
    }
    if (Object.keys(body).length > 0)
      await publishVersion(
        w.db,
        w.ctx.enterpriseId,
        live.id,
        { ...(body as VersionPublish), baseVersionId: live.revision },
        { message: configMessage },
      )
    if (fields.has('schedule')) {
      const schedule = scheduleOf(spec)
      if (schedule) await setTaskSchedule(w.db, w.ctx.enterpriseId, live.id, schedule)
      else await clearTaskSchedule(w.db, w.ctx.enterpriseId, live.id)
    }
  },
  async remove(w, live) {
    // Refused while a run is under way (409 task_busy, naming the task).
    await deleteTask(w.db, w.ctx.enterpriseId, live.id)
    w.refs.tasks.delete(live.name)
  },
}

function teamIdOf(w: Writer, team: unknown): string | null {
  return team === null ? null : w.refs.teams.get(team as string)!
}

/**
 * The order tasks are written in: a task after the tasks its successors name, where those are written
 * in the same apply, so no check sees a successor that is about to exist as unknown (a circle is
 * broken by name).
 */
export function successorOrder<T extends { name: string; spec: Record<string, unknown> }>(
  tasks: T[],
): T[] {
  const byName = new Map(tasks.map((t) => [t.name, t]))
  const done = new Set<string>()
  const visiting = new Set<string>()
  const order: T[] = []
  const visit = (task: T) => {
    if (done.has(task.name) || visiting.has(task.name)) return
    visiting.add(task.name)
    const successors = (task.spec.successors as { slug: string }[] | null) ?? []
    for (const s of [...successors].sort((a, b) => (a.slug < b.slug ? -1 : 1))) {
      const next = byName.get(s.slug)
      if (next) visit(next)
    }
    visiting.delete(task.name)
    done.add(task.name)
    order.push(task)
  }
  for (const task of [...tasks].sort((a, b) => (a.name < b.name ? -1 : 1))) visit(task)
  return order
}

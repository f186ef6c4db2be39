import { z } from 'zod'
import {
  catalogProvenances,
  catalogRoleSorts,
  catalogTaskSorts,
  taskKinds,
  taskOrigins,
  taskStatuses,
} from '../values.js'
import { IsoTime, PageQuery, Uuid, pagedEnvelope } from './common.js'
import { Role } from './organisation.js'
import { Name, SlugInput } from './organisation.js'
import { TaskRead, TaskVersion } from './tasks.js'

export { catalogProvenances, catalogRoleSorts, catalogTaskSorts }

// The catalogue (spec: Concepts "Catalogue", Endpoints Catalogue; DESIGN 12). Every enterprise's tokens
// read the same entries; an entry's id is its original's id.

const catalogTaskFields = {
  id: Uuid,
  slug: z.string(),
  name: z.string(),
  kind: z.enum(taskKinds),
  status: z.enum(taskStatuses),
  origin: z.enum(taskOrigins).meta({
    description: "the original's origin: builtin for the service's entries",
  }),
  provenance: z.enum(catalogProvenances),
  /** The publishing enterprise's name; null for the service's entries. */
  publisher: z.string().nullable(),
  assigneeRole: z.string().nullable(),
  goal: z.string(),
  tools: z.array(z.string()),
  currentVersionId: Uuid,
  versionNumber: z.number().int(),
  publishedAt: IsoTime,
  createdAt: IsoTime,
  updatedAt: IsoTime,
}

/** An entry of GET /v1/catalog/tasks. */
export const CatalogTask = z.object(catalogTaskFields).meta({ id: 'CatalogTask' })
export type CatalogTask = z.infer<typeof CatalogTask>

/** The schedule a clone starts with (the reporting analyst's weekly report, for example). */
export const CatalogSchedule = z
  .object({
    cron: z.string(),
    timezone: z.string(),
    input: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'CatalogSchedule' })
export type CatalogSchedule = z.infer<typeof CatalogSchedule>

/** GET /v1/catalog/tasks/{id}: one entry with its current definition and skill. */
export const CatalogTaskRead = z
  .object({
    ...catalogTaskFields,
    serializeOn: z.array(z.string()).nullable(),
    currentVersion: TaskVersion,
    skillMd: z.string(),
    schedule: CatalogSchedule.nullable(),
  })
  .meta({ id: 'CatalogTaskRead' })
export type CatalogTaskRead = z.infer<typeof CatalogTaskRead>

const CatalogRoleTask = z
  .object({
    id: Uuid,
    slug: z.string(),
    name: z.string(),
    status: z.enum(taskStatuses),
    goal: z.string(),
  })
  .meta({ id: 'CatalogRoleTask' })

/** An entry of GET /v1/catalog/roles and the answer of GET /v1/catalog/roles/{id}. */
export const CatalogRole = z
  .object({
    id: Uuid,
    slug: z.string(),
    name: z.string(),
    description: z.string(),
    provenance: z.enum(catalogProvenances),
    publisher: z.string().nullable(),
    tasks: z.array(CatalogRoleTask),
    publishedAt: IsoTime,
    createdAt: IsoTime,
    updatedAt: IsoTime,
  })
  .meta({ id: 'CatalogRole' })
export type CatalogRole = z.infer<typeof CatalogRole>

export const CatalogTaskListQuery = PageQuery.extend({
  status: z.string().optional(),
  kind: z.string().optional(),
  provenance: z.string().optional().meta({ description: 'service or enterprise' }),
  origin: z.string().optional(),
  slug: z.string().optional().meta({ description: 'matches any part' }),
})
export type CatalogTaskListQuery = z.infer<typeof CatalogTaskListQuery>

export const CatalogRoleListQuery = PageQuery.extend({
  provenance: z.string().optional().meta({ description: 'service or enterprise' }),
  slug: z.string().optional().meta({ description: 'matches any part' }),
})
export type CatalogRoleListQuery = z.infer<typeof CatalogRoleListQuery>

export const CatalogTaskPage = pagedEnvelope(CatalogTask).meta({ id: 'CatalogTaskPage' })
export const CatalogRolePage = pagedEnvelope(CatalogRole).meta({ id: 'CatalogRolePage' })

/** POST /v1/catalog/tasks/{id}/clone: the team; name and slug default to the original's. */
export const CatalogClone = z
  .object({
    teamId: Uuid,
    name: Name.optional(),
    slug: SlugInput.optional(),
    assigneeMemberId: z
      .unknown()
      .refine((v) => v === undefined, 'is no longer accepted: a task is assigned to a role')
      .optional(),
  })
  .meta({ id: 'CatalogClone' })
export type CatalogClone = z.infer<typeof CatalogClone>

/** POST /v1/catalog/roles/{id}/clone. */
export const CatalogRoleClone = z.object({ teamId: Uuid }).meta({ id: 'CatalogRoleClone' })
export type CatalogRoleClone = z.infer<typeof CatalogRoleClone>

/**
 * A schedule a clone came with: on only when its input gives every required input of the task a value,
 * else off until someone sets them (PUT /v1/tasks/{id}/schedule).
 */
export const ClonedSchedule = z
  .object({
    taskId: Uuid,
    taskSlug: z.string(),
    cron: z.string(),
    timezone: z.string(),
    input: z.record(z.string(), z.unknown()),
    enabled: z.boolean(),
    missingInputs: z.array(z.string()).meta({
      description:
        'the required inputs the schedule gives no value (absent or blank): why it is off; empty when on',
    }),
  })
  .meta({ id: 'ClonedSchedule' })
export type ClonedSchedule = z.infer<typeof ClonedSchedule>

/** What a role clone installed: the role (new or reused) and the linked tasks, each in full. */
export const CatalogRoleCloned = z
  .object({
    role: Role,
    roleCreated: z.boolean(),
    tasks: z.array(TaskRead),
    skipped: z.array(z.object({ slug: z.string(), reason: z.string() })),
    /** Each installed task's schedule, and whether the clone turned it on. */
    schedules: z.array(ClonedSchedule),
  })
  .meta({ id: 'CatalogRoleCloned' })
export type CatalogRoleCloned = z.infer<typeof CatalogRoleCloned>

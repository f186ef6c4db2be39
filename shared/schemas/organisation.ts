import { z } from 'zod'
import { IsoTime, Uuid } from './common.js'

// Teams, members and roles (spec: Resources "Other records"; Endpoints Teams, Members, Roles, Organisation).

/** 1..200 characters, as the spec's task name (Limits); refused as invalid_name. */
export const Name = z.string().trim().min(1).max(200)
/** Cleaned by the daemon; refused as invalid_slug when nothing is left or it is over 80 characters. */
export const SlugInput = z.string().max(200)

export const MemberRef = z
  .object({ id: Uuid, name: z.string(), email: z.string() })
  .meta({ id: 'MemberRef' })
export type MemberRef = z.infer<typeof MemberRef>

export const TeamRef = z
  .object({ id: Uuid, slug: z.string(), name: z.string() })
  .meta({ id: 'TeamRef' })
export type TeamRef = z.infer<typeof TeamRef>

export const RoleRef = z
  .object({ id: Uuid, slug: z.string(), name: z.string(), teamId: Uuid.nullable() })
  .meta({ id: 'RoleRef' })
export type RoleRef = z.infer<typeof RoleRef>

export const TaskRef = z
  .object({ id: Uuid, slug: z.string(), name: z.string() })
  .meta({ id: 'TaskRef' })
export type TaskRef = z.infer<typeof TaskRef>

// --- teams ------------------------------------------------------------------------------------------

export const ConcurrentRunLimitOrNull = z.number().int().min(1).max(10000).nullable()

export const Team = z
  .object({
    id: Uuid,
    slug: z.string(),
    name: z.string(),
    charter: z.string(),
    leadMemberId: Uuid.nullable(),
    concurrentRunLimit: z.number().int().nullable(),
    members: z.array(MemberRef),
    createdAt: IsoTime,
    updatedAt: IsoTime,
  })
  .meta({ id: 'Team' })
export type Team = z.infer<typeof Team>

export const TeamCreate = z
  .object({
    name: Name,
    slug: SlugInput.optional(),
    charter: z.string().max(10_000).optional(),
    leadMemberId: Uuid.nullable().optional(),
    concurrentRunLimit: ConcurrentRunLimitOrNull.optional(),
  })
  .meta({ id: 'TeamCreate' })
export type TeamCreate = z.infer<typeof TeamCreate>

export const TeamPatch = TeamCreate.omit({ slug: true }).partial().meta({ id: 'TeamPatch' })
export type TeamPatch = z.infer<typeof TeamPatch>

export const TeamMemberAdd = z
  .object({ memberId: Uuid, roleId: Uuid.optional() })
  .meta({ id: 'TeamMemberAdd' })

// --- members ----------------------------------------------------------------------------------------

export const Member = z
  .object({
    id: Uuid,
    name: z.string(),
    email: z.string(),
    persona: z.string(),
    /** Where the picture is, or null when there is none. */
    avatarUrl: z.string().nullable(),
    roles: z.array(RoleRef),
    teams: z.array(TeamRef),
    /** When the engine last gave this member a run; null if never (spec: Concepts, waited longest). */
    lastAssignedAt: IsoTime.nullable(),
    createdAt: IsoTime,
    updatedAt: IsoTime,
  })
  .meta({ id: 'Member' })
export type Member = z.infer<typeof Member>

export const MemberCreate = z
  .object({
    name: Name,
    /** Accepted and ignored: the email is always derived from the name (spec: Other records). */
    email: z.string().optional(),
    persona: z.string().max(20_000).optional(),
  })
  .meta({ id: 'MemberCreate' })
export type MemberCreate = z.infer<typeof MemberCreate>

export const MemberPatch = z
  .object({
    name: Name.optional(),
    email: z.email().max(320).optional(),
    persona: z.string().max(20_000).optional(),
  })
  .meta({ id: 'MemberPatch' })
export type MemberPatch = z.infer<typeof MemberPatch>

export const RoleGrant = z.object({ roleId: Uuid }).meta({ id: 'RoleGrant' })

// --- roles ------------------------------------------------------------------------------------------

export const Role = z
  .object({
    id: Uuid,
    slug: z.string(),
    name: z.string(),
    /** null for an enterprise-wide role. */
    teamId: Uuid.nullable(),
    builtin: z.boolean(),
    holderCount: z.number().int(),
    createdAt: IsoTime,
    updatedAt: IsoTime,
  })
  .meta({ id: 'Role' })
export type Role = z.infer<typeof Role>

export const RoleCreate = z
  .object({ name: Name, slug: SlugInput.optional(), teamId: Uuid.nullable().optional() })
  .meta({ id: 'RoleCreate' })
export type RoleCreate = z.infer<typeof RoleCreate>

export const RoleDetail = z
  .object({ role: Role, holders: z.array(MemberRef), tasks: z.array(TaskRef) })
  .meta({ id: 'RoleDetail' })
export type RoleDetail = z.infer<typeof RoleDetail>

export const RoleHolderAdd = z.object({ memberId: Uuid }).meta({ id: 'RoleHolderAdd' })
export const RoleTaskAdd = z.object({ taskId: Uuid }).meta({ id: 'RoleTaskAdd' })

// --- the tree ---------------------------------------------------------------------------------------

const OrgRole = RoleRef.extend({ tasks: z.array(TaskRef) })
const OrgMember = MemberRef.extend({ roles: z.array(OrgRole) })

export const OrgTree = z
  .object({
    teams: z.array(
      TeamRef.extend({
        charter: z.string(),
        leadMemberId: Uuid.nullable(),
        concurrentRunLimit: z.number().int().nullable(),
        members: z.array(OrgMember),
      }),
    ),
    /** Members on no team, with their (enterprise-wide) roles. */
    unassigned: z.array(OrgMember),
  })
  .meta({ id: 'OrgTree' })
export type OrgTree = z.infer<typeof OrgTree>

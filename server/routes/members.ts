import { z } from 'zod'
import { PageQuery, Uuid, pagedEnvelope } from '../../shared/schemas/common.js'
import { readPage } from '../db/paging.js'
import {
  createMember,
  deleteMemberAvatar,
  getAttachment,
  getMember,
  getMemberAvatar,
  grantRole,
  listEmails,
  listMembers,
  openEmail,
  removeMember,
  requireMember,
  revokeRole,
  setMemberAvatar,
  updateMember,
} from '../domain/org/index.js'
import { Avatar, AvatarInput } from '../../shared/schemas/enterprise.js'
import { Email } from '../../shared/schemas/mail.js'
import { Member, MemberCreate, MemberPatch, RoleGrant } from '../../shared/schemas/organisation.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

const MemberParams = z.object({ id: Uuid })
const MemberRoleParams = z.object({ id: Uuid, roleId: Uuid })

/** AI team members (spec: Endpoints Members). */
export function memberRoutes({ sql, config }: RouteDeps) {
  const app = createRouter()
  const common = { notFound: 'member_not_found' } as const

  route(
    app,
    {
      operationId: 'listMembers',
      method: 'get',
      path: '/',
      summary: 'Every member',
      response: z.array(Member),
    },
    async (c) => listMembers(sql, c.var.caller.enterpriseId),
  )

  route(
    app,
    {
      operationId: 'createMember',
      method: 'post',
      path: '/',
      summary: 'Create a member; the email is always made from the name (a sent email is ignored)',
      body: MemberCreate,
      status: 201,
      response: Member,
      errors: ['invalid_name', 'member_email_taken'],
    },
    async (c, { body }) => createMember(sql, c.var.caller.enterpriseId, body, config.mailDomain),
  )

  route(
    app,
    {
      ...common,
      operationId: 'getMember',
      method: 'get',
      path: '/{id}',
      summary: 'One member',
      params: MemberParams,
      response: Member,
    },
    async (c, { params }) => getMember(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'updateMember',
      method: 'patch',
      path: '/{id}',
      summary: "Change a member's name, email or persona",
      params: MemberParams,
      body: MemberPatch,
      response: Member,
      errors: ['invalid_name', 'member_email_taken'],
    },
    async (c, { params, body }) => updateMember(sql, c.var.caller.enterpriseId, params.id, body),
  )

  route(
    app,
    {
      ...common,
      operationId: 'deleteMember',
      method: 'delete',
      path: '/{id}',
      summary:
        'Remove a member from the organisation; runs that name it keep their history (beyond the spec)',
      params: MemberParams,
      status: 204,
    },
    async (c, { params }) => removeMember(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'getMemberAvatar',
      method: 'get',
      path: '/{id}/avatar',
      summary: "The member's picture, as the image file",
      params: MemberParams,
      rawResponse: 'image/*',
      errors: ['avatar_not_found'],
    },
    async (c, { params }) => {
      const image = await getMemberAvatar(sql, c.var.caller.enterpriseId, params.id)
      return c.body(new Uint8Array(image.data), 200, {
        'content-type': image.contentType,
        // As every authenticated answer (issue 44): kept by no cache, the browser's included.
        'cache-control': 'no-store',
      })
    },
  )

  route(
    app,
    {
      ...common,
      operationId: 'setMemberAvatar',
      method: 'put',
      path: '/{id}/avatar',
      summary: "Set the member's picture from a data: URL of a png, jpeg, gif or webp image",
      params: MemberParams,
      body: AvatarInput,
      response: Avatar,
      errors: ['invalid_image'],
    },
    async (c, { params, body }) =>
      setMemberAvatar(sql, c.var.caller.enterpriseId, params.id, body.dataUrl),
  )

  route(
    app,
    {
      ...common,
      operationId: 'deleteMemberAvatar',
      method: 'delete',
      path: '/{id}/avatar',
      summary: "Remove the member's picture",
      params: MemberParams,
      status: 204,
    },
    async (c, { params }) => deleteMemberAvatar(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'grantMemberRole',
      method: 'post',
      path: '/{id}/roles',
      summary: 'Grant the member a role (a team role puts them on its team)',
      params: MemberParams,
      body: RoleGrant,
      status: 201,
      response: Member,
      errors: ['role_not_found'],
    },
    async (c, { params, body }) => {
      await requireMember(sql, c.var.caller.enterpriseId, params.id) // the path's member first
      await grantRole(sql, c.var.caller.enterpriseId, body.roleId, params.id)
      return getMember(sql, c.var.caller.enterpriseId, params.id)
    },
  )

  route(
    app,
    {
      ...common,
      operationId: 'revokeMemberRole',
      method: 'delete',
      path: '/{id}/roles/{roleId}',
      summary: 'Take a role away from the member',
      params: MemberRoleParams,
      status: 204,
      errors: ['role_not_found'],
    },
    async (c, { params }) => {
      await requireMember(sql, c.var.caller.enterpriseId, params.id) // the path's member first
      await revokeRole(sql, c.var.caller.enterpriseId, params.roleId, params.id)
    },
  )

  route(
    app,
    {
      ...common,
      operationId: 'listMemberEmails',
      method: 'get',
      path: '/{id}/emails',
      summary: "The member's inbox, paged, by arrival; unreadOnly=true narrows",
      params: MemberParams,
      query: PageQuery.extend({ unreadOnly: z.string().optional() }),
      response: pagedEnvelope(Email).meta({ id: 'EmailPage' }),
    },
    async (c, { params, query }) =>
      listEmails(
        sql,
        c.var.caller.enterpriseId,
        params.id,
        query.unreadOnly === 'true',
        readPage(query, ['receivedAt']),
      ),
  )
  route(
    app,
    {
      ...common,
      operationId: 'getMemberEmail',
      method: 'get',
      path: '/{id}/emails/{emailId}',
      summary: 'One email; opening it marks it read',
      params: z.object({ id: Uuid, emailId: Uuid }),
      response: Email,
      errors: ['email_not_found'],
    },
    async (c, { params }) => openEmail(sql, c.var.caller.enterpriseId, params.id, params.emailId),
  )
  route(
    app,
    {
      ...common,
      operationId: 'getMemberEmailAttachment',
      method: 'get',
      path: '/{id}/emails/{emailId}/attachments/{attachmentId}',
      summary: 'An attachment, as the file',
      params: z.object({ id: Uuid, emailId: Uuid, attachmentId: Uuid }),
      // The file in its own media type (the one it was attached with), named by content-disposition.
      rawResponse: '*/*',
      errors: ['email_not_found', 'attachment_not_found'],
    },
    async (c, { params }) => {
      const file = await getAttachment(
        sql,
        c.var.caller.enterpriseId,
        params.id,
        params.emailId,
        params.attachmentId,
      )
      return c.body(new Uint8Array(file.data), 200, {
        'content-type': file.contentType,
        'content-disposition': `attachment; filename="${file.filename.replace(/["\\\r\n]/g, '_')}"`,
      })
    },
  )

  return app
}

import { z } from 'zod'
import type { ErrorCode } from '../../shared/errors.js'
import {
  ConfigApplied,
  ConfigApplyInput,
  ConfigExport,
  ConfigPlan,
  ConfigPlanInput,
  configBodyMaxBytes,
} from '../../shared/schemas/config.js'
import { validationError } from '../../shared/validation.js'
import {
  applyConfig,
  exportConfig,
  planConfig,
  type ConfigContext,
} from '../domain/config/index.js'
import type { AppContext, RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

// Configuration as code (issue 48; DESIGN 15). The path's resource, config, is no scope of its own:
// each document needs the scope of its kind's resource (read to export or plan, write to change), so a
// token does through documents exactly what it may do through the API (server/domain/config).

/** The body as checked here: the documents themselves are checked one by one by the domain. */
const PlanBody = z.object({
  documents: z.array(z.unknown()).max(10_000),
  prune: z.boolean().optional(),
  secrets: z.record(z.string(), z.string().min(1).max(4000)).optional(),
})
const ApplyBody = PlanBody.extend({
  base: z.string().max(200).optional(),
  dryRun: z.boolean().optional(),
})

/** What writing the documents' changes may answer: each resource's own refusals, named by document. */
const writeErrors: ErrorCode[] = [
  'config_document_invalid',
  'config_secret_missing',
  'config_name_ambiguous',
  'config_prune_refused',
  'invalid_name',
  'invalid_slug',
  'invalid_task_definition',
  'gate_required_for_tool',
  'skillMd_required',
  'serialize_on_invalid',
  'llm_model_not_in_catalogue',
  'tool_namespace_reserved',
  'url_not_allowed',
  'ceo_bind_only',
  'task_definition_read_only',
  'enterprise_not_found',
  'team_not_found',
  'member_not_found',
  'role_not_found',
  'task_not_found',
  'tool_connection_not_found',
  'task_version_conflict',
  'task_slug_taken',
  'team_slug_taken',
  'role_slug_taken',
  'member_email_taken',
  'os_task_immutable',
  'task_busy',
  'team_last',
  'team_has_tasks',
  'role_builtin',
  'role_team_mismatch',
  'tool_connection_shadows_enterprise',
]

const sizeNote = `The body may be up to ${configBodyMaxBytes / (1024 * 1024)} MB (a whole enterprise's documents), beyond the 100 KB of other routes.`

export function configRoutes({ sql, sealer, config }: RouteDeps) {
  const app = createRouter()
  const contextOf = (c: AppContext): ConfigContext => {
    const caller = c.var.caller
    return {
      enterpriseId: caller.enterpriseId,
      mailDomain: config.mailDomain,
      sealer,
      egress: config.egress,
      caller: {
        scopes: caller.scopes,
        // The chief executive, a signed-in owner: binds tool connections on the enterprise (spec:
        // Authentication 10), as routes/tools.ts says.
        mayBindEnterprise: caller.kind === 'session' && caller.role === 'owner',
      },
    }
  }
  const bodyOf = <S extends z.ZodType>(c: AppContext, schema: S): z.infer<S> => {
    const parsed = schema.safeParse(c.get('body') ?? {})
    if (!parsed.success) throw validationError(parsed.error, 'body')
    return parsed.data
  }

  route(
    app,
    {
      operationId: 'exportConfig',
      method: 'get',
      path: '/',
      summary:
        'The enterprise as documents: every team, role, member, task, connection and setting',
      description:
        'One document per object, in kind then name order, each spec holding what a person set and leaving out defaults, so two reads of an unchanged enterprise are equal; never an id, a version number, a time, a count or a secret (a token is named by the variable it is read from, tokenFrom: env:NAME). Needs the read scope of every kind (teams, roles, members, tasks, tools, llm, spend, enterprise). The base names this state: send it to apply.',
      response: ConfigExport,
      errors: ['config_name_ambiguous'],
    },
    async (c) => exportConfig(sql, contextOf(c)),
  )

  route(
    app,
    {
      operationId: 'planConfig',
      method: 'post',
      path: '/plan',
      summary: 'What applying the documents would change, object by object',
      description: `Each object the documents name is create, update (with the fields that change, old and new) or unchanged; with prune, the objects of the documents' kinds that no document names are delete. Nothing is written. Needs the read scope of the documents' kinds; comparing a secret sent in secrets needs the write scope of its kind. An invalid document answers 400 config_document_invalid naming it (index, kind, name) and the field. ${sizeNote}`,
      bodyDoc: ConfigPlanInput,
      response: ConfigPlan,
      errors: ['config_document_invalid', 'config_name_ambiguous'],
    },
    async (c) => planConfig(sql, contextOf(c), bodyOf(c, PlanBody)),
  )

  route(
    app,
    {
      operationId: 'applyConfig',
      method: 'post',
      path: '/apply',
      summary: 'Make the enterprise match the documents, in one transaction: all of it or nothing',
      description: `One apply of an enterprise at a time. With base (from a plan or an export), 409 config_changed if the enterprise changed since. Every document is checked, then every change's scope (403 api_token_scope naming the first missing one), before anything is written; then each change goes through its resource's own rules (the definition checks, the egress rule, who may bind what), and any refusal, named by its document (index, kind, name) and, where it comes from one, the field (spec.gates, spec.url), leaves nothing applied. A task whose definition changes gets a new version, message "applied from config". prune never deletes a task with a run under way (409 task_busy) nor a member a run not ended needs (409 config_prune_refused). dryRun does it all and rolls it back. ${sizeNote}`,
      bodyDoc: ConfigApplyInput,
      response: ConfigApplied,
      errors: [...writeErrors, 'config_changed'],
    },
    async (c) => applyConfig(sql, contextOf(c), bodyOf(c, ApplyBody)),
  )
  return app
}

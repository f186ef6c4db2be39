// Every error code the API answers, with the one status it answers with (spec: Errors, Codes).
// A code is written once here, so a route cannot answer a code with the wrong status.
export const errorStatus = {
  // 400: missing or invalid request
  invalid_request: 400,
  invalid_json: 400,
  invalid_name: 400,
  invalid_slug: 400,
  unknown_purpose: 400,
  invalid_task_definition: 400,
  llm_model_not_in_catalogue: 400,
  assignee_member_removed: 400,
  serialize_on_invalid: 400,
  skillMd_required: 400,
  gate_required_for_tool: 400,
  invalid_image: 400,
  tool_namespace_reserved: 400,
  url_not_allowed: 400,
  config_document_invalid: 400,
  config_secret_missing: 400,
  fork_step_invalid: 400,
  bulk_too_many_runs: 400,
  // 401: no or wrong credentials
  invalid_credentials: 401,
  // 403: the token cannot do this
  api_token_scope: 403,
  api_token_cannot_manage_tokens: 403,
  api_token_cannot_manage_connections: 403,
  task_definition_read_only: 403,
  ceo_bind_only: 403,
  csrf_required: 403,
  owner_only: 403,
  enterprise_not_chosen: 403,
  // 404: nothing with that id in the enterprise
  not_found: 404,
  enterprise_not_found: 404,
  task_not_found: 404,
  team_not_found: 404,
  member_not_found: 404,
  role_not_found: 404,
  run_not_found: 404,
  version_not_found: 404,
  schedule_not_found: 404,
  avatar_not_found: 404,
  task_not_runnable: 404,
  log_not_found: 404,
  delivery_not_found: 404,
  execution_not_found: 404,
  gate_not_found: 404,
  connection_not_found: 404,
  tool_connection_not_found: 404,
  email_not_found: 404,
  attachment_not_found: 404,
  plan_not_found: 404,
  note_not_found: 404,
  review_item_not_found: 404,
  recommendation_not_found: 404,
  chat_not_found: 404,
  tool_call_not_found: 404,
  grant_not_found: 404,
  user_not_found: 404,
  token_not_found: 404,
  session_not_found: 404,
  consent_request_not_found: 404,
  app_connection_not_found: 404,
  invite_not_found: 404,
  subscription_not_found: 404,
  bulk_operation_not_found: 404,
  // 409: conflict with the current state
  overlap: 409,
  member_busy: 409,
  gate_not_waiting: 409,
  already_decided: 409,
  task_version_conflict: 409,
  task_slug_taken: 409,
  team_slug_taken: 409,
  role_slug_taken: 409,
  enterprise_slug_taken: 409,
  member_email_taken: 409,
  os_task_immutable: 409,
  illegal_transition: 409,
  chat_replying: 409,
  chat_closed: 409,
  use_gate_decision: 409,
  no_coo: 409,
  task_busy: 409,
  team_last: 409,
  team_has_tasks: 409,
  role_builtin: 409,
  role_team_mismatch: 409,
  replay_idempotency_key_reused: 409,
  delivery_not_replayable: 409,
  note_not_active: 409,
  note_duplicate: 409,
  note_idempotency_key_reused: 409,
  review_item_decided: 409,
  recommendation_not_applicable: 409,
  email_taken: 409,
  last_owner: 409,
  consent_request_decided: 409,
  already_member: 409,
  tool_connection_shadows_enterprise: 409,
  config_changed: 409,
  config_prune_refused: 409,
  config_name_ambiguous: 409,
  token_revoked: 409,
  token_expired: 409,
  token_of_connected_app: 409,
  subscription_disabled: 409,
  bulk_idempotency_key_reused: 409,
  // 413: body over 100 KB
  body_too_large: 413,
  // 429: too many attempts; the answer says when to try again (Retry-After)
  login_locked: 429,
  sign_in_busy: 429,
  too_many_consent_requests: 429,
  too_many_streams: 429,
  rate_limited: 429,
  // 503: the database cannot be reached just now; the answer says when to try again (Retry-After)
  database_unavailable: 503,
  // 503: an archived run or chat whose archive file this process cannot read (OSD_ARCHIVE_DIR)
  archive_unavailable: 503,
  // 503: osd is stopping (issue 51): the connection closes; ask again when it (or another) is back
  shutting_down: 503,
} as const

export type ErrorCode = keyof typeof errorStatus
export type ErrorStatus = (typeof errorStatus)[ErrorCode]

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(errorStatus, value)
}

// Reason phrases for the framework-level shape `{message, error, statusCode}` (spec: Errors, Two body shapes).
export const statusName: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Payload Too Large',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
}

/** The framework-level body: the code in `message` (spec: Errors, Two body shapes). */
export function frameworkBody(status: 401 | 404 | 405 | 500 | 503, message: string) {
  return { message, error: statusName[status]!, statusCode: status }
}

/**
 * The one error type (DESIGN 4): thrown by domain code and routes, written by the one error writer as
 * `{error: code, message, ...extra}` with the status the code answers.
 */
export class ApiError extends Error {
  readonly status: number
  constructor(
    readonly code: ErrorCode,
    message?: string,
    readonly extra?: Record<string, unknown>,
  ) {
    super(message ?? code)
    this.name = 'ApiError'
    this.status = errorStatus[code]
  }

  toBody(): ErrorBody {
    return { error: this.code, message: this.message, ...this.extra }
  }
}

export interface ErrorBody {
  error: string
  message?: string
  [extra: string]: unknown
}

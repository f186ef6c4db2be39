import type { z } from 'zod'
import { ApiError, type ErrorCode } from './errors.js'

// Fields whose refusal has its own code in the spec (Errors, Codes); every other field answers
// invalid_request with a message naming it.
export const fieldCodes: Record<string, ErrorCode> = {
  name: 'invalid_name',
  slug: 'invalid_slug',
  serializeOn: 'serialize_on_invalid',
  assigneeMemberId: 'assignee_member_removed',
}

/** Turns a zod failure into the ApiError the spec asks for, naming every field at fault. */
export function validationError(error: z.ZodError, where: 'body' | 'query'): ApiError {
  const issues = error.issues.map((issue) => ({
    field: issue.path.length ? issue.path.join('.') : where,
    message: issue.message,
  }))
  const first = error.issues[0]
  const head = first?.path[0]
  const code = (typeof head === 'string' && fieldCodes[head]) || 'invalid_request'
  const message = issues.map((i) => `${i.field}: ${i.message}`).join('; ')
  return new ApiError(code, message, { issues })
}

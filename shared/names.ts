import { ApiError } from './errors.js'
import { cleanSlug, maxSlugLength } from './slug.js'

// Names and slugs as the API takes them (spec: Limits; Task definition, slug): wire rules, beside the
// schemas Name and SlugInput (schemas/organisation.ts) that only bound their length. Every resource with
// a name or a slug (enterprise, team, member, role, task) checks it here, with the spec's own codes.

/** A cleaned slug, or 400 invalid_slug when nothing is left or it is too long (spec: Limits). */
export function validSlug(raw: string, what = 'slug'): string {
  const slug = cleanSlug(raw)
  if (!slug || slug.length > maxSlugLength) {
    throw new ApiError(
      'invalid_slug',
      `${what} must have 1 to ${maxSlugLength} letters, digits or hyphens after cleaning; got "${raw}".`,
    )
  }
  return slug
}

/** A trimmed name of 1 to 200 characters, or 400 invalid_name. */
export function validName(raw: string): string {
  const name = raw.trim()
  if (name.length < 1 || name.length > 200) {
    throw new ApiError('invalid_name', 'name must be 1 to 200 characters.')
  }
  return name
}

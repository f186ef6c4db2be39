export const maxSlugLength = 80

/**
 * Cleans a slug the way the spec says (Task definition, slug): lower case, accents dropped, every run of
 * characters other than letters and digits turned into a single hyphen. Leading and trailing hyphens are
 * trimmed, so "  Hello, World! " becomes "hello-world". The result may be empty or too long; callers
 * decide what that means (400 invalid_slug).
 */
export function cleanSlug(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
}

/** A slug made from a name: cleaned, then cut to the limit on a hyphen-free end. */
export function slugFromName(name: string): string {
  return cleanSlug(name).slice(0, maxSlugLength).replace(/-+$/, '')
}

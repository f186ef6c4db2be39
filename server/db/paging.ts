import type { Paged } from '../../shared/schemas/common.js'
import type { Db, Fragment } from './sql.js'
import { idPrefixRange, isUuid } from '../../shared/ids.js'

// The one paged-list helper (spec: Paged envelope, Limits; DESIGN 4) for the six paged lists.

export interface PageRequest<S extends string = string> {
  page: number
  limit: number
  offset: number
  order: 'asc' | 'desc'
  sort: S
}

export const maxPageSize = 200
export const defaultPageSize = 25
/**
 * The last page a request may name: its offset stays a whole number PostgreSQL reads as a bigint
 * (`page=1e18` would make an offset JavaScript writes as 1e+21). Any page past the data is empty anyway.
 */
export const maxPage = Math.floor(Number.MAX_SAFE_INTEGER / maxPageSize)

/**
 * Reads page, limit, order and sort from a query (the routes' query schemas have refused what is not a
 * whole number, shared/schemas/common.ts pageParameters). Nothing is refused here: a bad page is 1, a
 * limit outside 1..200 is brought inside, anything but `asc` is desc, and an unknown sort is the list's default
 * (the first of `sorts`).
 */
export function readPage<S extends string>(
  query: { page?: string | number; limit?: string | number; order?: string; sort?: string },
  sorts: readonly [S, ...S[]],
): PageRequest<S> {
  const pageNumber = Math.trunc(Number(query.page))
  const page = Number.isFinite(pageNumber) && pageNumber >= 1 ? Math.min(pageNumber, maxPage) : 1
  // An empty limit (`?limit=`) is no limit given, not a limit of 0.
  const limitNumber = Math.trunc(Number(String(query.limit ?? '').trim() || defaultPageSize))
  const limit = Number.isFinite(limitNumber)
    ? Math.min(maxPageSize, Math.max(1, limitNumber))
    : defaultPageSize
  const sort = sorts.includes(query.sort as S) ? (query.sort as S) : sorts[0]
  return {
    page,
    limit,
    offset: (page - 1) * limit,
    order: query.order === 'asc' ? 'asc' : 'desc',
    sort,
  }
}

/**
 * `order by <column> <direction>, <tiebreak>`: the column comes from the list's own whitelist, looked up
 * by the sort key, so a sort value from a request never reaches SQL as text (DESIGN 3). Nulls come
 * last; a sort in `notNull` (a column that holds none, its tiebreak too) is ordered plainly instead, so
 * that an index in that order serves it (`desc nulls last` is not the order of a `desc` index, and the
 * whole list was sorted for its first page).
 */
export function orderBy<S extends string>(
  db: Db,
  page: PageRequest<S>,
  columns: Record<S, string>,
  tiebreak = 'id',
  notNull: readonly S[] = [],
): Fragment {
  const nulls = notNull.includes(page.sort) ? db`` : db`nulls last`
  const direction = page.order === 'asc' ? db`asc ${nulls}` : db`desc ${nulls}`
  const column = db(columns[page.sort] as never) as Fragment
  return db`order by ${column} ${direction}, ${db(tiebreak as never)} ${direction}`
}

export function envelope<T>(data: T[], total: number, page: PageRequest): Paged<T> {
  return {
    data,
    total,
    page: page.page,
    limit: page.limit,
    pages: Math.max(1, Math.ceil(total / page.limit)),
  }
}

/**
 * `and <column> = <value>` for a list's id filter. A value that is not an id matches nothing (an unknown
 * filter value is answered, not refused, and PostgreSQL would refuse it as a uuid); none filters nothing.
 */
export function idFilter(db: Db, column: string, value: string | undefined): Fragment {
  if (!value) return db``
  return isUuid(value) ? db`and ${db(column)} = ${value}` : db`and false`
}

/**
 * `and <column> between <low> and <high>` for a list's idPrefix (issue 51): the uuids that start with
 * the prefix, a range of the primary key's btree, never `<column>::text like`. The route's query schema
 * refused a malformed one (400 naming idPrefix); none filters nothing. A list adds it to every filter
 * of its own, so that a prefix names only what the caller may list.
 */
export function idPrefixFilter(db: Db, column: string, prefix: string | undefined): Fragment {
  if (prefix === undefined) return db``
  const range = idPrefixRange(prefix)
  if (!range) return db`and false`
  return db`and ${db(column)} between ${range.low}::uuid and ${range.high}::uuid`
}

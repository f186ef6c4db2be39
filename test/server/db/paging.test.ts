import { describe, expect, it } from 'vitest'
import { envelope, readPage } from '../../../server/db/paging.js'

const sorts = ['createdAt', 'status', 'finishedAt'] as const

describe('readPage (spec: Limits)', () => {
  it('defaults to page 1, limit 25, desc, the first sort', () => {
    expect(readPage({}, sorts)).toEqual({
      page: 1,
      limit: 25,
      offset: 0,
      order: 'desc',
      sort: 'createdAt',
    })
  })

  it.each([
    [{ limit: '0' }, 1],
    [{ limit: '-5' }, 1],
    [{ limit: '201' }, 200],
    [{ limit: '200' }, 200],
    [{ limit: '7.9' }, 7],
    [{ limit: 'many' }, 25],
    [{ limit: '' }, 25],
    [{ limit: ' ' }, 25],
  ])('brings limit %j into range: %i', (query, limit) => {
    expect(readPage(query, sorts).limit).toBe(limit)
  })

  it.each([
    [{ page: '0' }, 1],
    [{ page: '-3' }, 1],
    [{ page: 'x' }, 1],
    [{ page: '4' }, 4],
  ])('reads page %j as %i', (query, page) => {
    expect(readPage(query, sorts).page).toBe(page)
  })

  it('keeps a far page a whole number PostgreSQL can offset by', () => {
    for (const page of ['1e18', '1e300', String(Number.MAX_SAFE_INTEGER)]) {
      const { offset } = readPage({ page, limit: '200' }, sorts)
      expect(Number.isSafeInteger(offset)).toBe(true)
      expect(String(offset)).toMatch(/^\d+$/)
    }
  })

  it('orders asc only for asc, and desc for anything else', () => {
    expect(readPage({ order: 'asc' }, sorts).order).toBe('asc')
    expect(readPage({ order: 'ASC' }, sorts).order).toBe('desc')
    expect(readPage({ order: 'up' }, sorts).order).toBe('desc')
  })

  it('sorts by a whitelisted field, else by the default', () => {
    expect(readPage({ sort: 'status' }, sorts).sort).toBe('status')
    expect(readPage({ sort: 'id; drop table runs' }, sorts).sort).toBe('createdAt')
  })

  it('computes the offset from page and limit', () => {
    expect(readPage({ page: '3', limit: '10' }, sorts).offset).toBe(20)
  })
})

describe('envelope (spec: Paged envelope)', () => {
  it('has at least one page even when empty', () => {
    expect(envelope([], 0, readPage({}, sorts))).toEqual({
      data: [],
      total: 0,
      page: 1,
      limit: 25,
      pages: 1,
    })
  })

  it('counts pages from the total', () => {
    expect(envelope([1], 51, readPage({ limit: '25', page: '3' }, sorts)).pages).toBe(3)
  })
})

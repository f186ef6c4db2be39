import { describe, expect, it } from 'vitest'
import { announceHere, NotifiedCache } from '../../../server/db/notified-cache.js'
import { createSql, transaction } from '../../../server/db/sql.js'
import { createTestDatabase } from '../../helpers/db.js'
import { eventually } from '../../helpers/wait.js'

const byKey = (payload: string, key: string) => payload === key

describe('NotifiedCache', () => {
  it('drops an entry in every listening process when its change is announced', async () => {
    const db = await createTestDatabase()
    const other = createSql(db.url, { max: 2 }) // a second process's pool
    const a = new NotifiedCache<number>('test_changed', byKey)
    const b = new NotifiedCache<number>('test_changed', byKey)
    // Both LISTENs in place: each empties its cache when it is (a 200 ms wait was not always enough
    // on a loaded machine, and b's emptied what the test had just set; issue 40).
    const failed = (e: unknown) => {
      throw e
    }
    await Promise.all([a.follow(db.sql, failed), b.follow(other, failed)])
    a.set('x', 1)
    b.set('x', 1)
    b.set('y', 2)
    await db.sql`select pg_notify('test_changed', 'x')`
    await eventually(() => a.get('x') === undefined && b.get('x') === undefined, 1000)
    expect(b.get('y')).toBe(2)
    await other.end()
  })

  it("tells this process's caches of the channel at once, at the commit of the change, and not of one rolled back", async () => {
    // No NOTIFY is sent here: what is seen is announceHere's own, not the listener's.
    const db = await createTestDatabase()
    const failed = (e: unknown) => {
      throw e
    }
    const cache = new NotifiedCache<number>('test_here', byKey)
    const other = new NotifiedCache<number>('test_elsewhere', byKey)
    await Promise.all([cache.follow(db.sql, failed), other.follow(db.sql, failed)])
    cache.set('x', 1)
    other.set('x', 1)
    // Outside a transaction: at once.
    announceHere(db.sql, 'test_here', ['x'])
    expect(cache.get('x')).toBeUndefined()
    expect(other.get('x')).toBe(1)
    // In one: not before its commit, and never for one rolled back.
    cache.set('x', 1)
    await transaction(db.sql, async (tx) => {
      announceHere(tx, 'test_here', ['x'])
      expect(cache.get('x')).toBe(1)
    })
    expect(cache.get('x')).toBeUndefined()
    cache.set('x', 1)
    await expect(
      transaction(db.sql, async (tx) => {
        announceHere(tx, 'test_here', ['x'])
        throw new Error('rolled back')
      }),
    ).rejects.toThrow('rolled back')
    expect(cache.get('x')).toBe(1)
  })

  it('does not store a value loaded while a change was announced', async () => {
    const cache = new NotifiedCache<string>('c', byKey)
    let finish!: (v: string) => void
    const loading = cache.through('k', () => new Promise((r) => (finish = r)))
    cache.invalidate('k') // the change lands while the old value is being read
    finish('old')
    expect(await loading).toBe('old')
    expect(cache.get('k')).toBeUndefined()
    expect(await cache.through('k', async () => 'new')).toBe('new')
    expect(cache.get('k')).toBe('new')
  })

  it('forgets entries after their time to live and keeps at most its size', async () => {
    const cache = new NotifiedCache<number>('c', byKey, 1000, 2)
    cache.set('a', 1, 0)
    expect(cache.get('a', 999)).toBe(1)
    expect(cache.get('a', 1000)).toBeUndefined()
    cache.set('a', 1)
    cache.set('b', 2)
    cache.set('c', 3)
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([undefined, 2, 3])
  })

  it('never stores a missing value', async () => {
    const cache = new NotifiedCache<number>('c', byKey)
    let loads = 0
    await cache.through('k', async () => (loads++, undefined))
    await cache.through('k', async () => (loads++, undefined))
    expect(loads).toBe(2)
  })
})

import { onCommit, type Db, type Sql } from './sql.js'

/** The caches of this process that follow each channel (weakly: an app closed leaves with its caches). */
const following = new Map<string, Set<WeakRef<NotifiedCache<unknown>>>>()

/**
 * Tells this process's caches of `channel` what the NOTIFY of `payload`, sent in `db`'s transaction,
 * will tell every process: at the commit (at once outside a transaction), so the process that made a
 * change never answers from what it held before (a revoked token, an ended session passed a call made
 * right after; the NOTIFY comes back to its own listener milliseconds later). The other processes
 * still learn of it from the NOTIFY.
 */
export function announceHere(db: Db, channel: string, payloads: string[]): void {
  onCommit(db, () => {
    const caches = following.get(channel)
    if (!caches) return
    for (const ref of caches) {
      const cache = ref.deref()
      if (!cache) caches.delete(ref)
      else for (const payload of payloads) cache.invalidate(payload)
    }
  })
}

/**
 * A per-process cache of values whose changes are announced with NOTIFY on `channel` (the payload
 * names what changed), so a hot read need not pay a database round trip. Every osd process keeps its
 * own: a change reaches all of them when it commits, the time-to-live bounds how long a lost
 * notification could leave a stale value, and each (re)connect of the listener empties the cache,
 * since notifications sent while it was away are gone. Never a record: the database is.
 */
export class NotifiedCache<V> {
  private entries = new Map<string, { value: V; expires: number }>()
  // Moves on every invalidation: a load that began before one must not store what it read.
  private generation = 0

  constructor(
    readonly channel: string,
    /** Which entries a notification with this payload makes stale. */
    private readonly staleFor: (payload: string, key: string, value: V) => boolean,
    private readonly ttlMs = 5_000,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: string, now = Date.now()): V | undefined {
    const entry = this.entries.get(key)
    if (!entry) return undefined
    if (entry.expires <= now) {
      this.entries.delete(key)
      return undefined
    }
    return entry.value
  }

  /** Keeps `value` for the time-to-live, or until `until` (ms) when that comes first. */
  set(key: string, value: V, now = Date.now(), until?: number | null): void {
    // Maps iterate in insertion order: when full, the oldest entry goes.
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!)
    const expires = Math.min(now + this.ttlMs, until ?? Infinity)
    this.entries.set(key, { value, expires })
  }

  /**
   * The cached value, or the one `load` reads (and keeps, when there is one, until `until` says it
   * stops being true if that comes before the time-to-live: a token's expiry, say).
   */
  async through(
    key: string,
    load: () => Promise<V | undefined>,
    until?: (value: V) => number | null,
  ): Promise<V | undefined> {
    const cached = this.get(key)
    if (cached !== undefined) return cached
    const generation = this.generation
    const value = await load()
    if (value !== undefined && generation === this.generation)
      this.set(key, value, Date.now(), until?.(value))
    return value
  }

  invalidate(payload: string): void {
    this.generation++
    for (const [key, entry] of this.entries) {
      if (this.staleFor(payload, key, entry.value)) this.entries.delete(key)
    }
  }

  clear(): void {
    this.generation++
    this.entries.clear()
  }

  /**
   * Follows the channel's notifications on `sql`'s listening connection. Resolves once the LISTEN is
   * in place (the cache emptied by it), never rejects: a failure goes to `onError`.
   */
  follow(sql: Sql, onError: (err: unknown) => void): Promise<void> {
    const caches = following.get(this.channel) ?? new Set()
    following.set(this.channel, caches)
    caches.add(new WeakRef(this as NotifiedCache<unknown>))
    return sql
      .listen(
        this.channel,
        (payload) => this.invalidate(payload),
        () => this.clear(),
      )
      .then(() => undefined, onError)
  }
}

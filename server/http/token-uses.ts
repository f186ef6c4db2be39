import type { Sql } from '../db/sql.js'
import { noteTokenUses } from '../domain/people/index.js'
import type { Logger } from '../log.js'

/**
 * When tokens were last used (issue 45: `lastUsedAt`), written off the request's path. A request only
 * notes its token in memory (a map read on the hot path); the first use of a token in a minute is
 * written by a batch a moment later, in one statement whose commit does not wait for the WAL flush
 * (DESIGN 3: a use lost to a crash is noted by the next). Every osd process does this for the tokens it
 * sees, and the statement itself skips a row written less than a minute ago, so a token's row is
 * written at most once a minute however many processes use it. createApp makes one unless given;
 * `osd serve` gives one and flushes it when it stops, after the last request (serve.ts).
 */
export class TokenUses {
  /** When this process last sent each token's use to the database, in ms. */
  private sent = new Map<string, number>()
  private pending = new Set<string>()
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
    /** How long uses gather before they are written together. */
    private readonly batchMs = 1_000,
    private readonly everyMs = 60_000,
    private readonly maxTokens = 100_000,
  ) {}

  note(tokenId: string, now = Date.now()): void {
    const last = this.sent.get(tokenId)
    if (last !== undefined && now - last < this.everyMs) return
    if (this.sent.size >= this.maxTokens) this.sent.clear()
    this.sent.set(tokenId, now)
    this.pending.add(tokenId)
    this.timer ??= setTimeout(() => void this.flush(), this.batchMs).unref()
  }

  /** Writes the uses noted so far (at once: at shutdown, or from a test). */
  async flush(): Promise<void> {
    clearTimeout(this.timer)
    this.timer = undefined
    const ids = [...this.pending]
    this.pending.clear()
    if (ids.length === 0) return
    try {
      await noteTokenUses(this.sql, ids)
    } catch (err) {
      // The next use after a minute tries again: forget that these were sent.
      for (const id of ids) this.sent.delete(id)
      this.log.warn({ err }, 'cannot note when tokens were last used')
    }
  }
}

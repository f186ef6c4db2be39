import { NotifiedCache } from '../db/notified-cache.js'
import type { Sql } from '../db/sql.js'
import {
  settingsChangedChannel,
  webhookSecretRotatedChannel,
  type EnterpriseSettings,
  type WebhookSecretHolder,
} from '../domain/enterprises/index.js'
import { sessionChangedChannel, tokenChangedChannel } from '../domain/people/index.js'
import type { FoundSession, TokenCaller } from '../domain/people/index.js'
import type { Logger } from '../log.js'

/**
 * What hot reads keep in memory, each dropped when its change is announced (db/notified-cache.ts):
 * the callers of recently seen tokens (dropped by token id when it is revoked, changed or rotated, and
 * kept no longer than the secret signs in), the sessions of recently
 * seen session secrets (dropped by session id or by their person's id),
 * enterprise settings (keyed and dropped by enterprise id), and the webhook secrets' hashes (keyed by
 * enterprise slug, dropped by enterprise id on rotation).
 */
export interface Caches {
  callers: NotifiedCache<TokenCaller>
  sessions: NotifiedCache<FoundSession>
  settings: NotifiedCache<EnterpriseSettings>
  webhookSecrets: NotifiedCache<WebhookSecretHolder>
}

export function createCaches(sql: Sql, log: Logger): Caches {
  const caches: Caches = {
    callers: new NotifiedCache<TokenCaller>(
      tokenChangedChannel,
      (tokenId, _, caller) => caller.tokenId === tokenId,
    ),
    sessions: new NotifiedCache<FoundSession>(
      sessionChangedChannel,
      (id, _, session) => session.sessionId === id || session.userId === id,
    ),
    settings: new NotifiedCache<EnterpriseSettings>(
      settingsChangedChannel,
      (id, key) => key === id,
    ),
    webhookSecrets: new NotifiedCache<WebhookSecretHolder>(
      webhookSecretRotatedChannel,
      // An unknown slug's stand-in (id '') goes with any rotation: a first rotation is what makes an
      // enterprise's webhooks usable (spec: Authentication 8), so a new one is never refused for long.
      (id, _, holder) => holder.id === id || holder.id === '',
    ),
  }
  for (const cache of Object.values(caches) as NotifiedCache<unknown>[]) {
    cache.follow(sql, (err: unknown) =>
      log.error({ err, channel: cache.channel }, 'cannot follow changes'),
    )
  }
  return caches
}

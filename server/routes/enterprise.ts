import {
  Avatar,
  AvatarInput,
  ChatMemoryDepthInput,
  ChatMemoryDepthSetting,
  ChatModelTierSetting,
  Concurrency,
  EnterpriseOverview,
  Metrics,
  WebhookSecretInfo,
  WebhookSecretRotated,
  chatMemoryDepths,
} from '../../shared/schemas/enterprise.js'
import {
  deleteEnterpriseAvatar,
  getEnterprise,
  getSettings,
  getWebhookSecretInfo,
  rotateWebhookSecret,
  setEnterpriseAvatar,
  updateSettings,
  type EnterpriseSettings,
} from '../domain/enterprises/index.js'
import { getToken, getUser } from '../domain/people/index.js'
import { pauseOf } from '../domain/pauses/index.js'
import { pauseEnterprise, resumeEnterprise } from '../domain/runs/index.js'
import { EnterprisePause, PauseInput, ResumeInput } from '../../shared/schemas/pauses.js'
import { getRetention, updateRetention } from '../domain/retention/index.js'
import { RetentionSettings, RetentionSettingsInput } from '../../shared/schemas/retention.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/** Enterprise settings and the webhook secret (spec: Endpoints, Enterprise settings). */
export function enterpriseRoutes({ sql, caches }: RouteDeps) {
  const app = createRouter()

  // Settings are read from the per-process cache; a change is written through and announced.
  const settingsOf = (enterpriseId: string) =>
    caches.settings.through(enterpriseId, () =>
      getSettings(sql, enterpriseId),
    ) as Promise<EnterpriseSettings>
  const change = async (enterpriseId: string, patch: Partial<EnterpriseSettings>) => {
    const settings = await updateSettings(sql, enterpriseId, patch)
    caches.settings.set(enterpriseId, settings)
    return settings
  }

  route(
    app,
    {
      operationId: 'getEnterprise',
      method: 'get',
      path: '/',
      summary:
        'The enterprise, and the calling token with its scopes or the signed-in person (beyond the spec)',
      response: EnterpriseOverview,
    },
    async (c) => {
      const caller = c.var.caller
      const [enterprise, paused] = await Promise.all([
        getEnterprise(sql, caller.enterpriseId),
        pauseOf(sql, caller.enterpriseId, null),
      ])
      if (caller.kind === 'session') {
        const user = await getUser(sql, caller.userId)
        return { enterprise, token: null, person: { ...user, role: caller.role }, paused }
      }
      const token = await getToken(sql, caller.enterpriseId, caller.tokenId)
      return {
        enterprise,
        token: { id: token.id, name: token.name, scopes: token.scopes, lastChars: token.lastChars },
        person: null,
        paused,
      }
    },
  )

  // Pause and resume of everything the enterprise runs (issue 50; docs/usage.md#pause): every
  // task's runs and every chat's replies wait. Idempotent as a task's are.
  route(
    app,
    {
      operationId: 'pauseEnterprise',
      method: 'post',
      path: '/pause',
      summary:
        'Pause every task and chat of the enterprise: starts and messages are accepted and wait, runs under way stop after their current step, until the resume (beyond the spec)',
      description:
        'Idempotent: pausing a paused enterprise answers the pause in force (the first reason stands). Recorded with who paused and why; enterprise.paused in the event feed.',
      body: PauseInput,
      response: EnterprisePause,
    },
    async (c, { body }) => {
      const { enterpriseId, actor } = c.var.caller
      return {
        paused: await pauseEnterprise(sql, enterpriseId, { by: actor, reason: body.reason }),
      }
    },
  )

  route(
    app,
    {
      operationId: 'resumeEnterprise',
      method: 'post',
      path: '/resume',
      summary:
        "End the enterprise's pause: waiting runs go on in their order and chats get their replies (beyond the spec)",
      description:
        'Idempotent: resuming an enterprise that is not paused changes nothing. A task paused on its own stays paused. enterprise.resumed in the event feed.',
      body: ResumeInput,
      response: EnterprisePause,
    },
    async (c, { body }) => {
      const { enterpriseId, actor } = c.var.caller
      await resumeEnterprise(sql, enterpriseId, { by: actor, reason: body.reason })
      return { paused: null }
    },
  )

  route(
    app,
    {
      operationId: 'getWebhookSecret',
      method: 'get',
      path: '/webhook-secret',
      summary: 'Which webhook secret is in use and since when: its last characters only',
      response: WebhookSecretInfo,
    },
    async (c) => getWebhookSecretInfo(sql, c.var.caller.enterpriseId),
  )

  route(
    app,
    {
      operationId: 'rotateWebhookSecret',
      method: 'post',
      path: '/webhook-secret/rotate',
      summary: 'A new webhook secret, returned in this answer only; the old one stops at once',
      response: WebhookSecretRotated,
    },
    async (c) => {
      const rotated = await rotateWebhookSecret(sql, c.var.caller.enterpriseId)
      // Other processes drop the old hash when the notification reaches them; this one at once.
      caches.webhookSecrets.invalidate(c.var.caller.enterpriseId)
      return rotated
    },
  )

  route(
    app,
    {
      operationId: 'setEnterpriseAvatar',
      method: 'put',
      path: '/avatar',
      summary: "Set the enterprise's picture from a data: URL of an image",
      body: AvatarInput,
      response: Avatar,
      errors: ['invalid_image'],
    },
    async (c, { body }) => setEnterpriseAvatar(sql, c.var.caller.enterpriseId, body.dataUrl),
  )

  route(
    app,
    {
      operationId: 'deleteEnterpriseAvatar',
      method: 'delete',
      path: '/avatar',
      summary: "Remove the enterprise's picture",
      status: 204,
    },
    async (c) => deleteEnterpriseAvatar(sql, c.var.caller.enterpriseId),
  )

  // Each setting is a GET and a PATCH of one field; PATCH answers the value now in force.
  route(
    app,
    {
      operationId: 'getConcurrentRunLimit',
      method: 'get',
      path: '/concurrency',
      summary: 'The enterprise concurrent-run limit',
      response: Concurrency,
    },
    async (c) => pick(await settingsOf(c.var.caller.enterpriseId), 'concurrentRunLimit'),
  )
  route(
    app,
    {
      operationId: 'setConcurrentRunLimit',
      method: 'patch',
      path: '/concurrency',
      summary: 'Set the enterprise concurrent-run limit',
      body: Concurrency,
      response: Concurrency,
    },
    async (c, { body }) =>
      pick(await change(c.var.caller.enterpriseId, body), 'concurrentRunLimit'),
  )

  route(
    app,
    {
      operationId: 'getChatModelTier',
      method: 'get',
      path: '/chat-model-tier',
      summary: 'The model tier chats use',
      response: ChatModelTierSetting,
    },
    async (c) => pick(await settingsOf(c.var.caller.enterpriseId), 'chatModelTier'),
  )
  route(
    app,
    {
      operationId: 'setChatModelTier',
      method: 'patch',
      path: '/chat-model-tier',
      summary: 'Set the model tier chats use',
      body: ChatModelTierSetting,
      response: ChatModelTierSetting,
    },
    async (c, { body }) => pick(await change(c.var.caller.enterpriseId, body), 'chatModelTier'),
  )

  route(
    app,
    {
      operationId: 'getChatMemoryDepth',
      method: 'get',
      path: '/chat-memory-depth',
      summary: 'How much memory chats read, with the depths to choose from',
      response: ChatMemoryDepthSetting,
    },
    async (c) => withDepths(await settingsOf(c.var.caller.enterpriseId)),
  )
  route(
    app,
    {
      operationId: 'setChatMemoryDepth',
      method: 'patch',
      path: '/chat-memory-depth',
      summary: 'Set how much memory chats read',
      body: ChatMemoryDepthInput,
      response: ChatMemoryDepthSetting,
    },
    async (c, { body }) => withDepths(await change(c.var.caller.enterpriseId, body)),
  )

  route(
    app,
    {
      operationId: 'getEnterpriseMetrics',
      method: 'get',
      path: '/metrics',
      summary: "The enterprise's metrics",
      response: Metrics,
    },
    async (c) => pick(await settingsOf(c.var.caller.enterpriseId), 'metrics'),
  )
  route(
    app,
    {
      operationId: 'setEnterpriseMetrics',
      method: 'patch',
      path: '/metrics',
      summary: "Set the enterprise's metrics",
      body: Metrics,
      response: Metrics,
    },
    async (c, { body }) => pick(await change(c.var.caller.enterpriseId, body), 'metrics'),
  )

  // Retention (issue 46): read and written here, not through the settings cache, since only the
  // retention pass acts on it (it reads the table at each pass).
  route(
    app,
    {
      operationId: 'getRetention',
      method: 'get',
      path: '/retention',
      summary:
        'How long finished runs, closed chats and webhook deliveries stay live, and whether they are archived (beyond the spec)',
      response: RetentionSettings,
    },
    async (c) => getRetention(sql, c.var.caller.enterpriseId),
  )
  route(
    app,
    {
      operationId: 'setRetention',
      method: 'patch',
      path: '/retention',
      summary:
        'Change retention windows (ISO 8601 durations, null for ever) or the archive; fields left out stay (beyond the spec)',
      body: RetentionSettingsInput,
      response: RetentionSettings,
    },
    async (c, { body }) => updateRetention(sql, c.var.caller.enterpriseId, body),
  )

  return app
}

function pick<T, K extends keyof T>(settings: T, key: K): Pick<T, K> {
  return { [key]: settings[key] } as Pick<T, K>
}

function withDepths(settings: { chatMemoryDepth: string }) {
  return {
    chatMemoryDepth: settings.chatMemoryDepth as (typeof chatMemoryDepths)[number],
    depths: [...chatMemoryDepths],
  }
}

import { afterFile } from './after-file.js'
import { randomUUID } from 'node:crypto'
import { expect } from 'vitest'
import { startEngine, type Engine } from '../../server/engine/index.js'
import { loadModelSdks } from '../../server/engine/models/index.js'
import type { Db } from '../../server/db/sql.js'
import { startRun } from '../../server/domain/runs/index.js'
import type { TestApp } from './app.js'

/** An API start through the domain, as POST /v1/tasks/{id}/runs makes it. */
export function apiStart(
  db: Db,
  enterpriseId: string,
  taskId: string,
  input: Record<string, unknown>,
) {
  return startRun(db, { enterpriseId, task: { id: taskId }, input, origin: 'api' })
}

/** A real engine in this process, on the test file's database (the same code `osd serve` runs). */
export async function startTestEngine(
  t: TestApp,
  options: Partial<Parameters<typeof startEngine>[0]> = {},
): Promise<Engine> {
  // An engine starts loading the model SDKs when it takes its first llm run; a test loads them here,
  // in its file's hook, so that no test's own time includes the import (seconds on a busy machine).
  if (!options.providers) await loadModelSdks()
  const engine = await startEngine({
    sql: t.sql,
    log: t.log,
    config: t.config,
    sealer: t.sealer,
    ...options,
  })
  // Stopped after the file at the latest, once however often a test stops it too.
  let stopping: Promise<void> | undefined
  const stop = () => (stopping ??= engine.stop())
  afterFile(stop)
  return { ...engine, stop }
}

/** Follows a run with the long-poll until its status is one of `statuses`; answers the run detail. */
export async function waitForRun(
  t: TestApp,
  runId: string,
  statuses: string[],
  timeoutMs = 10_000,
  token?: string,
) {
  const deadline = Date.now() + timeoutMs
  let after: string | undefined
  for (;;) {
    const query = after ? `?afterEventId=${after}&waitSeconds=2` : ''
    const res = await t.call('GET', `/v1/runs/${runId}${query}`, token ? { token } : {})
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    if (statuses.includes(res.body.run.status)) {
      return after
        ? (await t.call('GET', `/v1/runs/${runId}`, token ? { token } : {})).body
        : res.body
    }
    after = res.body.events.at(-1)?.id ?? after
    if (Date.now() > deadline)
      throw new Error(`run ${runId} is ${res.body.run.status}, not ${statuses.join('|')}`)
  }
}

/**
 * A task of `kind` assigned to the built-in ceo role, ready to run. It runs beside its holder's other
 * work (overlapPolicy os) unless `extra` says otherwise, so tests sharing the one ceo are not refused
 * member_busy by each other.
 */
async function ceoTask(
  t: TestApp,
  kind: 'deterministic' | 'llm',
  extra: Record<string, unknown>,
  token: string | undefined,
) {
  const name = `${kind === 'llm' ? 'Llm' : 'Det'} ${Math.random().toString(36).slice(2, 10)}`
  const res = await t.call('POST', '/v1/tasks', {
    body: { name, kind, assigneeRole: 'ceo', overlapPolicy: 'os', ...extra },
    ...(token ? { token } : {}),
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body as { id: string; slug: string; currentVersionId: string }
}

/** A deterministic task (ceoTask): its runs succeed as soon as an engine dispatches them. */
export const deterministicTask = (
  t: TestApp,
  extra: Record<string, unknown> = {},
  token?: string,
) => ceoTask(t, 'deterministic', extra, token)

/**
 * A task of kind llm (ceoTask): once dispatched its runs stay running until an executor moves them,
 * which none does in a test without an engine.
 */
export const llmTask = (t: TestApp, extra: Record<string, unknown> = {}, token?: string) =>
  ceoTask(t, 'llm', extra, token)

/**
 * An enterprise of its own (`label` and a few random letters) with a model key bound to `provider`,
 * unless `keyless` (`bind` binds it later). The key's value is what the fake model provider scripts its
 * answers by.
 */
export async function keyedEnterprise(
  t: TestApp,
  label: string,
  {
    provider = 'provider_a',
    keyless = false,
  }: { provider?: 'provider_a' | 'provider_b'; keyless?: boolean } = {},
) {
  const e = await t.createEnterprise(`${label} ${randomUUID().slice(0, 8)}`)
  const key = `key-${randomUUID()}`
  const as = { token: e.token }
  const bind = async () => {
    const bound = await t.call('POST', '/v1/llm/bindings', {
      ...as,
      body: { apiKey: key, provider },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
  }
  if (!keyless) await bind()
  return { e, key, as, bind }
}

/**
 * Binds the tool server at `url` as `name` (vcs unless told) to the first team of the enterprise whose
 * token is `as`; answers that team.
 */
export async function bindTeamTools(
  t: TestApp,
  as: { token: string },
  url: string,
  name = 'vcs',
): Promise<{ id: string }> {
  const [team] = (await t.call('GET', '/v1/teams', as)).body
  const bound = await t.call('POST', '/v1/tools/bindings', {
    ...as,
    body: { name, url, layer: 'team', layerId: team.id },
  })
  expect(bound.status, JSON.stringify(bound.body)).toBe(201)
  return team
}

// An enterprise with an object of every kind of document (issue 48), made through the API as a person
// and a token would: settings, teams, roles (a team's and an enterprise-wide one), members holding them,
// a team's lead, tasks with successors, a schedule and a long skill, tool connections on the enterprise
// (the chief executive's) and on a team, model keys, a tier's model and spend caps.

export type Api = (
  method: string,
  path: string,
  body?: unknown,
) => Promise<{ status: number; body: any }>

/** The secrets the enterprise's tokens and keys were made with, by the variable an export names. */
export const everyKindSecrets: Record<string, string> = {
  OSD_TOOL_VCS_TOKEN: 'vcs-token-1',
  OSD_TOOL_TEAM_ENGINEERING_DOCS_TOKEN: 'docs-token-1',
  OSD_MODEL_KEY_PROVIDER_A: 'sk-enterprise-key-000001',
  OSD_MODEL_KEY_TEAM_ENGINEERING_PROVIDER_B: 'sk-team-key-000002',
}

async function ok(api: Api, method: string, path: string, body?: unknown): Promise<any> {
  const res = await api(method, path, body)
  if (res.status >= 300)
    throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

/**
 * Fills an enterprise with every kind. `api` acts with a token holding every scope, `ceo` as the
 * enterprise's chief executive (a signed-in owner), who alone connects tools on the enterprise.
 */
export async function makeEveryKind(api: Api, ceo: Api): Promise<void> {
  await ok(api, 'PATCH', '/v1/enterprise/concurrency', { concurrentRunLimit: 7 })
  await ok(api, 'PATCH', '/v1/enterprise/metrics', { metrics: ['lead time', 'escapes'] })
  const eng = await ok(api, 'POST', '/v1/teams', {
    name: 'Engineering',
    charter: 'Ship the product.\nKeep it running.',
    concurrentRunLimit: 3,
  })
  const ops = await ok(api, 'POST', '/v1/teams', { name: 'Operations' })
  const reviewer = await ok(api, 'POST', '/v1/roles', { name: 'Reviewer', teamId: eng.id })
  const writer = await ok(api, 'POST', '/v1/roles', { name: 'Writer' })
  const ada = await ok(api, 'POST', '/v1/members', { name: 'Ada Lovelace', persona: 'Careful.' })
  const grace = await ok(api, 'POST', '/v1/members', { name: 'Grace Hopper' })
  await ok(api, 'POST', `/v1/members/${ada.id}/roles`, { roleId: reviewer.id })
  await ok(api, 'POST', `/v1/members/${grace.id}/roles`, { roleId: writer.id })
  await ok(api, 'POST', `/v1/teams/${ops.id}/members`, { memberId: grace.id })
  await ok(api, 'PATCH', `/v1/members/${grace.id}`, { email: 'grace@navy.example' })
  await ok(api, 'PATCH', `/v1/teams/${eng.id}`, { leadMemberId: ada.id })
  const report = await ok(api, 'POST', '/v1/tasks', {
    name: 'Weekly report',
    teamId: eng.id,
    assigneeRole: 'reviewer',
    goal: 'Tell the week.',
    skillMd: '# Weekly report\n\nRead the week\'s runs.\n\n  - then write: "yes", no: 1\n',
    tools: ['os.mail_send'],
    gates: [{ tool: 'os.mail_send', owner: 'ceo' }],
    inputs: [{ key: 'week', label: 'Week', type: 'string', required: true }],
    successors: [{ slug: 'publish', on: 'succeeded', delayMinutes: 5 }],
    serializeOn: ['week'],
    spend: { moneyUsdPerRun: 1.5, maxModelTier: 'mid' },
  })
  await ok(api, 'PUT', `/v1/tasks/${report.id}/schedule`, {
    cron: '0 9 * * 1',
    timezone: 'Europe/Paris',
    input: { week: 'last' },
  })
  await ok(api, 'POST', '/v1/tasks', {
    name: 'Publish',
    teamId: ops.id,
    assigneeRole: 'writer',
    kind: 'deterministic',
    status: 'deprecated',
  })
  await ok(ceo, 'POST', '/v1/tools/bindings', {
    name: 'vcs',
    url: 'https://vcs.example/mcp',
    token: everyKindSecrets.OSD_TOOL_VCS_TOKEN,
    layer: 'enterprise',
  })
  await ok(api, 'POST', '/v1/tools/bindings', {
    name: 'docs',
    url: 'https://docs.example/mcp',
    token: everyKindSecrets.OSD_TOOL_TEAM_ENGINEERING_DOCS_TOKEN,
    layer: 'team',
    layerId: eng.id,
    description: 'The handbook.',
  })
  await ok(api, 'POST', '/v1/tools/bindings', {
    name: 'intranet',
    sites: ['intranet.example'],
    startPage: 'https://intranet.example/home',
    layer: 'member',
    layerId: ada.id,
  })
  await ok(api, 'POST', '/v1/llm/bindings', {
    apiKey: everyKindSecrets.OSD_MODEL_KEY_PROVIDER_A,
    provider: 'provider_a',
  })
  await ok(api, 'POST', '/v1/llm/bindings', {
    apiKey: everyKindSecrets.OSD_MODEL_KEY_TEAM_ENGINEERING_PROVIDER_B,
    provider: 'provider_b',
    layer: 'team',
    layerId: eng.id,
  })
  await ok(api, 'POST', '/v1/llm/tiers/override', {
    provider: 'provider_a',
    tier: 'economical',
    model: 'claude-haiku-4-5',
  })
  await ok(api, 'PATCH', '/v1/spend/caps', { layer: 'enterprise', moneyCentsDay: 10_000 })
  await ok(api, 'PATCH', '/v1/spend/caps', { layer: 'team', layerId: eng.id, moneyCentsDay: 2_500 })
  await ok(api, 'PATCH', '/v1/spend/caps', {
    layer: 'task',
    layerId: report.id,
    moneyCentsDay: 300,
  })
  await ok(api, 'PATCH', '/v1/spend/caps', { layer: 'member', layerId: ada.id, moneyCentsDay: 150 })
  await ok(api, 'PATCH', '/v1/enterprise/retention', { finishedRuns: 'P30D', closedChats: null })
}

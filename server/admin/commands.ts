import type { Command } from 'commander'
import { ApiError } from '../../shared/errors.js'
import { allScopes, parseScopes } from '../../shared/scopes.js'
import { loadConfig, type Config } from '../config.js'
import { openDatabase } from '../db/index.js'
import { migrate } from '../db/migrate.js'
import type { Sql } from '../db/sql.js'
import { publish, unpublish, type Published } from '../domain/catalog.js'
import { createEnterprise, findEnterpriseBySlug, listEnterprises } from '../domain/enterprises.js'
import { createToken, listTokens, revokeToken } from '../domain/tokens.js'
import { createLogger } from '../log.js'

// osd admin (DESIGN 8): operator bootstrap on the server host. Works whether or not a daemon runs on the
// same data dir or DATABASE_URL: the embedded server is joined if running, else started for the command.

interface DbFlags {
  dataDir?: string
}

async function withDatabase<T>(
  flags: DbFlags,
  fn: (sql: Sql, config: Config) => Promise<T>,
): Promise<T> {
  const config = loadConfig({ dataDir: flags.dataDir })
  const log = createLogger(process.env.OSD_LOG_LEVEL ?? 'warn', process.stderr as never)
  const db = await openDatabase(config, log, { max: 2, applicationName: 'osd admin' })
  try {
    await migrate(db.sql)
    return await fn(db.sql, config)
  } finally {
    await db.close()
  }
}

async function enterpriseId(sql: Sql, slug: string): Promise<string> {
  const enterprise = await findEnterpriseBySlug(sql, slug)
  if (!enterprise)
    throw new ApiError('enterprise_not_found', `No enterprise with the slug "${slug}".`)
  return enterprise.id
}

function print(json: boolean, value: unknown, human: () => string): void {
  process.stdout.write(json ? JSON.stringify(value, null, 2) + '\n' : human() + '\n')
}

export function registerAdmin(admin: Command): void {
  admin.option('--data-dir <dir>', 'data dir of the embedded PostgreSQL (env OSD_DATA_DIR)')
  const dbFlags = (): DbFlags => admin.opts<DbFlags>()

  const enterprise = admin.command('enterprise').description('create and list enterprises')
  enterprise
    .command('create')
    .description('create an enterprise and a token holding every scope')
    .requiredOption('--name <name>', 'display name')
    .option('--slug <slug>', 'URL name (made from the name when omitted)')
    .option('--json', 'print JSON')
    .action(async (opts: { name: string; slug?: string; json?: boolean }) => {
      const result = await withDatabase(dbFlags(), async (sql, config) => {
        const created = await createEnterprise(sql, { name: opts.name, slug: opts.slug }, config)
        const { token } = await createToken(sql, created.id, { name: 'owner', scopes: allScopes })
        return { enterprise: created, token }
      })
      print(opts.json ?? false, result, () =>
        [
          `enterprise ${result.enterprise.slug} (${result.enterprise.id}) created`,
          `token (every scope; shown once): ${result.token}`,
        ].join('\n'),
      )
    })
  enterprise
    .command('list')
    .description('list enterprises')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const rows = await withDatabase(dbFlags(), (sql) => listEnterprises(sql))
      print(opts.json ?? false, rows, () =>
        rows.map((e) => `${e.slug}\t${e.id}\t${e.name}`).join('\n'),
      )
    })

  const token = admin.command('token').description('create, list and revoke API tokens')
  token
    .command('create')
    .description('create an API token (shown once)')
    .requiredOption('--enterprise <slug>', 'enterprise slug')
    .requiredOption(
      '--scopes <list>',
      'comma-separated scopes, e.g. tasks:read,runs:write; * for all',
    )
    .option('--name <name>', 'name to recognise it by', 'api')
    .option('--json', 'print JSON')
    .action(async (opts: { enterprise: string; scopes: string; name: string; json?: boolean }) => {
      const { scopes, unknown } = parseScopes(opts.scopes)
      if (unknown.length || scopes.length === 0) {
        throw new UsageError(
          `unknown scopes: ${unknown.join(', ') || '(none given)'}; scopes are <resource>:read|write ` +
            `with resource one of ${[...new Set(allScopes.map((s) => s.split(':')[0]))].join(', ')}`,
        )
      }
      const created = await withDatabase(dbFlags(), async (sql) =>
        createToken(sql, await enterpriseId(sql, opts.enterprise), { name: opts.name, scopes }),
      )
      const { id, name, token: secret } = created
      print(opts.json ?? false, { id, name, scopes: created.scopes, token: secret }, () =>
        [`token ${id} (${name}) created; shown once:`, secret].join('\n'),
      )
    })
  token
    .command('list')
    .description("list an enterprise's tokens (never their secrets)")
    .requiredOption('--enterprise <slug>', 'enterprise slug')
    .option('--json', 'print JSON')
    .action(async (opts: { enterprise: string; json?: boolean }) => {
      const rows = await withDatabase(dbFlags(), async (sql) =>
        listTokens(sql, await enterpriseId(sql, opts.enterprise)),
      )
      print(opts.json ?? false, rows, () =>
        rows
          .map((t) =>
            [
              t.id,
              t.name,
              `…${t.lastChars}`,
              t.revokedAt ? 'revoked' : 'active',
              t.scopes.join(','),
            ].join('\t'),
          )
          .join('\n'),
      )
    })
  token
    .command('revoke')
    .description('revoke a token at once')
    .argument('<id>', 'token id')
    .requiredOption('--enterprise <slug>', 'enterprise slug')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { enterprise: string; json?: boolean }) => {
      const revoked = await withDatabase(dbFlags(), async (sql) =>
        revokeToken(sql, await enterpriseId(sql, opts.enterprise), id),
      )
      print(opts.json ?? false, revoked, () => `token ${revoked.id} revoked`)
    })

  const catalog = admin
    .command('catalog')
    .description(
      "publish an enterprise's task or role to every enterprise's catalogue, or take it out",
    )
  const target = (opts: { task?: string; role?: string }) => {
    if (Boolean(opts.task) === Boolean(opts.role)) {
      throw new UsageError('name exactly one of --task SLUG or --role SLUG')
    }
    return { task: opts.task, role: opts.role }
  }
  const describe = (p: Published) =>
    [
      `${p.kind} ${p.slug} (${p.id}) ${p.published ? 'published' : 'unpublished'}`,
      ...p.tasks.map((x) => `  task ${x.slug} (${x.id})`),
      ...(p.published
        ? []
        : [`${p.detachedClones} installed clone(s) detached: they keep their last version`]),
    ].join('\n')
  for (const [verb, act, help] of [
    [
      'publish',
      publish,
      'publish a task, or a role with the tasks that name it (repeating changes nothing)',
    ],
    [
      'unpublish',
      unpublish,
      'take a task or role out; installed clones keep their last version, detached',
    ],
  ] as const) {
    catalog
      .command(verb)
      .description(help)
      .requiredOption('--enterprise <slug>', 'enterprise slug')
      .option('--task <slug>', "the enterprise's task")
      .option('--role <slug>', "the enterprise's role")
      .option('--json', 'print JSON')
      .action(
        async (opts: { enterprise: string; task?: string; role?: string; json?: boolean }) => {
          const which = target(opts)
          const result = await withDatabase(dbFlags(), async (sql) =>
            act(sql, await enterpriseId(sql, opts.enterprise), which),
          )
          print(opts.json ?? false, result, () => describe(result))
        },
      )
  }
}

export class UsageError extends Error {}

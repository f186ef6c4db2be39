import type { Command } from 'commander'
import { ApiError } from '../../shared/errors.js'
import { allScopes, parseScopes } from '../../shared/scopes.js'
import { loadConfig, logLevel, type Config } from '../config.js'
import { checkDataDir } from '../data-dir.js'
import { openDatabase, type Database } from '../db/index.js'
import { migrate } from '../db/migrate.js'
import { transaction, type Db, type Sql } from '../db/sql.js'
import type { Published } from '../domain/catalog/index.js'
import type { Moved } from '../domain/retention/index.js'
import { createLogger, type Logger } from '../log.js'
import { backup, BackupError, restoreBackup, verifyBackup } from './backup.js'
import { registerSecrets } from './secrets.js'

// osd admin (DESIGN 8): operator bootstrap on the server host. Works whether or not a daemon runs on the
// same data dir or DATABASE_URL: the embedded server is joined if running, else started for the command.

/** The domain's functions the commands call, loaded by the first that needs them (admin/domain.ts). */
export const domain = () => import('./domain.js')

/** Where osd's commands (server/cli.ts) write, and where they read a password piped to them. */
export interface OsdIo {
  stdout: { write(text: string): unknown }
  stderr: { write(text: string): unknown }
  /** stdin, taken only when a command reads it (--password-stdin). */
  stdin(): AsyncIterable<Buffer | string> & { isTTY?: boolean }
  /**
   * Aborted, with a StoppedError, by the process's first SIGINT or SIGTERM while a command runs
   * (server/main.ts); never in process.
   */
  stopped?: AbortSignal
}

/** A command stopped by a signal: what it had open is closed, its transaction rolled back. */
export class StoppedError extends Error {}

interface DbFlags {
  dataDir?: string
}

/**
 * Runs `fn` on the database, migrated first. A signal meanwhile (io.stopped) closes it at once: its
 * statements are cut and its transaction rolled back, and an embedded server this command started
 * stops, which Node's default exit left running; the command then fails with the signal's name.
 */
async function withDatabase<T>(
  flags: DbFlags,
  io: OsdIo,
  fn: (sql: Sql, config: Config) => Promise<T>,
): Promise<T> {
  return withRawDatabase(flags, io, async (sql, config) => {
    // A migration's waits for its locks are said on stderr, as the command's other warnings.
    await migrate(sql, undefined, {
      log: createLogger(logLevel(process.env.OSD_LOG_LEVEL, 'warn'), io.stderr),
    })
    ;(await domain()).usePasswordCost(config.passwordLog2N)
    return fn(sql, config)
  })
}

/**
 * The database as it is, unmigrated: what a backup copies, and what a restore must find empty.
 * `stopsItself`: `fn` ends on io.stopped by itself (a backup removes its partial file first), and the
 * database is closed after it.
 */
function withRawDatabase<T>(
  flags: DbFlags,
  io: OsdIo,
  fn: (sql: Sql, config: Config) => Promise<T>,
  options: { stopsItself?: boolean } = {},
): Promise<T> {
  const config = loadConfig({ dataDir: flags.dataDir })
  const log = createLogger(logLevel(process.env.OSD_LOG_LEVEL, 'warn'), io.stderr)
  return holdDatabase(config, log, io, { max: 2, applicationName: 'osd admin' }, fn, options)
}

/**
 * Opens the database for a command (osd admin, osd migrate), runs `fn` on it and closes it. While it
 * holds it (opening it too: an embedded server's start takes a second or two), a signal is the
 * command's (io.stopped; server/cli.ts stopOnSignals exits at once when no command holds one): the
 * database is closed at once, its statements cut and its transaction rolled back, and an embedded
 * server this command started stops, which Node's default exit left running; the command then fails
 * with the signal's name. `stopsItself`: `fn` ends on io.stopped by itself (a backup removes its
 * partial file first), and the database is closed after it.
 */
export async function holdDatabase<T>(
  config: Config,
  log: Logger,
  io: OsdIo,
  pool: { max: number; applicationName: string },
  fn: (sql: Sql, config: Config) => Promise<T>,
  { stopsItself = false }: { stopsItself?: boolean } = {},
): Promise<T> {
  const stopped = io.stopped
  let db: Database | undefined
  const stop = () => {
    if (!stopsItself) void db?.close({ now: true })
  }
  stopped?.addEventListener('abort', stop, { once: true })
  try {
    await checkDataDir(config)
    db = await openDatabase(config, log, pool)
    stopped?.throwIfAborted()
    return await fn(db.sql, config)
  } catch (err) {
    throw stopped?.aborted && !stopsItself ? stopped.reason : err
  } finally {
    stopped?.removeEventListener('abort', stop)
    await db?.close()
  }
}

/** A pass's moves, one line per enterprise and kind that has any. */
function describeMoves(moves: Moved[], dry: boolean): string {
  const lines: string[] = []
  for (const m of moves) {
    if (m.busy) {
      lines.push(`${m.slug}\tbusy: another osd process is moving its data now`)
      continue
    }
    const kinds: [string, number][] = [
      ['runs', m.runs],
      ['chats', m.chats],
      ['webhook deliveries', m.webhookDeliveries],
      ['unauthenticated deliveries', m.unauthenticatedDeliveries],
      ['schedule fires', m.scheduleFires],
      ['bulk operations', m.bulkOperations],
    ]
    for (const [kind, n] of kinds)
      if (n > 0)
        lines.push(
          `${m.slug}\t${kind}\t${n}` +
            (kind === 'runs' ? ` (${m.executions} executions)` : '') +
            (kind === 'unauthenticated deliveries'
              ? '\tdeleted'
              : m.archive
                ? '\tarchived'
                : '\tdeleted'),
        )
  }
  if (lines.length === 0) return dry ? 'nothing is past its window' : 'nothing was past its window'
  return [dry ? 'a pass would move:' : 'moved:', ...lines].join('\n')
}

async function personByEmail(db: Db, email: string) {
  const found = await (await domain()).findUserByEmail(db, email)
  if (!found)
    throw new ApiError(
      'user_not_found',
      `No person with the email ${email}: osd admin user create first.`,
    )
  return found
}

/** The password piped to stdin, without its final line break; never taken from an argument. */
async function readPassword(io: OsdIo): Promise<string> {
  const stdin = io.stdin()
  if (stdin.isTTY) throw new UsageError('pipe the password to stdin (--password-stdin)')
  const chunks: Buffer[] = []
  for await (const chunk of stdin) chunks.push(Buffer.from(chunk))
  const password = Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '')
  if (!password) throw new UsageError('no password on stdin')
  return password
}

interface EnterpriseCreateFlags {
  name: string
  slug?: string
  ownerEmail?: string
  passwordStdin?: boolean
  json?: boolean
}

/**
 * The owner of a first enterprise made in one command (issue 35: what osd logs on its first start): a
 * new person, in the enterprise's transaction, so a refused enterprise leaves no person behind.
 */
async function newOwner(tx: Db, email: string, password: string) {
  try {
    return await (await domain()).createUser(tx, { email, password })
  } catch (err) {
    if (err instanceof ApiError && err.code === 'email_taken')
      throw new ApiError(
        'email_taken',
        `${err.message} Leave out --password-stdin to make them the owner.`,
      )
    throw err
  }
}

async function enterpriseId(sql: Db, slug: string): Promise<string> {
  const enterprise = await (await domain()).findEnterpriseBySlug(sql, slug)
  if (!enterprise)
    throw new ApiError('enterprise_not_found', `No enterprise with the slug "${slug}".`)
  return enterprise.id
}

interface BackupFlags {
  out?: string
  verify?: string
  keepFree?: string
  force?: boolean
  json?: boolean
}

export function registerAdmin(admin: Command, io: OsdIo): void {
  admin.option('--data-dir <dir>', 'data dir of the embedded PostgreSQL (env OSD_DATA_DIR)')
  const dbFlags = (): DbFlags => admin.opts<DbFlags>()
  const print = (json: boolean, value: unknown, human: () => string): void =>
    void io.stdout.write(json ? JSON.stringify(value, null, 2) + '\n' : human() + '\n')

  admin
    .command('prune')
    .description(
      "run one retention pass now: move what is past each enterprise's windows out of the live tables (into the archive when kept)",
    )
    .option('--dry-run', 'move nothing: say what a pass would move, per enterprise and kind')
    .option('--enterprise <slug>', 'only this enterprise')
    .option('--json', 'print JSON')
    .action(async (opts: { dryRun?: boolean; enterprise?: string; json?: boolean }) => {
      const moves = await withDatabase(dbFlags(), io, async (sql, config) => {
        const only = opts.enterprise ? await enterpriseId(sql, opts.enterprise) : undefined
        const { planRetention, retentionPass } = await domain()
        return opts.dryRun
          ? planRetention(sql, { enterpriseId: only })
          : retentionPass(sql, { archiveDir: config.archiveDir, enterpriseId: only })
      })
      print(opts.json ?? false, moves, () => describeMoves(moves, opts.dryRun ?? false))
    })

  admin
    .command('backup')
    .description(
      "copy the whole database, in one snapshot, to a file (gzip) while osd runs; or check a copy. Secrets in it stay sealed with this instance's server key, which the copy does not hold: keep OSD_SECRET_KEY (or the data dir's secret.key) too",
    )
    .option('--out <file>', 'write the copy to this file (refused if it exists, unless --force)')
    .option('--force', 'with --out: replace the file if it exists')
    .option(
      '--verify <file>',
      "read a copy whole and check it (header, each table's rows, checksums)",
    )
    .option(
      '--keep-free <bytes>',
      'free space the disk must keep after the copy (default 5% of the disk, at least 64 MB)',
    )
    .option('--json', 'print JSON')
    .action(async (opts: BackupFlags) => {
      if (Boolean(opts.out) === Boolean(opts.verify))
        throw new UsageError('name one of --out FILE (make a copy) or --verify FILE (check one)')
      if (opts.verify) {
        const checked = await verifyBackup(opts.verify)
        print(opts.json ?? false, { ok: true, ...checked }, () =>
          [
            `${checked.file}: whole and consistent`,
            `made ${checked.createdAt}, schema ${checked.migrations}`,
            `${checked.tables.length} tables, ${checked.rows} rows`,
          ].join('\n'),
        )
        return
      }
      const keepFree = opts.keepFree === undefined ? undefined : Number(opts.keepFree)
      if (keepFree !== undefined && !(Number.isInteger(keepFree) && keepFree >= 0))
        throw new UsageError(`--keep-free takes a number of bytes; got "${opts.keepFree}"`)
      // Ctrl+C or a cron job's timeout (io.stopped) stops the copy and removes FILE.partial (the
      // process's default left it, refusing the next backup to FILE and holding its space).
      const made = await withRawDatabase(
        dbFlags(),
        io,
        (sql) =>
          backup(sql, opts.out!, {
            keepFreeBytes: keepFree,
            replace: opts.force ?? false,
            signal: io.stopped,
          }).catch((err: unknown) => {
            throw io.stopped?.aborted
              ? new BackupError(`${io.stopped.reason.message}; the partial copy was removed`)
              : err
          }),
        { stopsItself: true },
      )
      print(opts.json ?? false, made, () =>
        [
          `${made.file}: ${made.tables} tables, ${made.rows} rows, ${made.bytes} bytes, in ${made.seconds.toFixed(1)} s`,
          `schema ${made.migrations}; model keys and tool tokens in it open only with this instance's server key`,
        ].join('\n'),
      )
    })

  admin
    .command('restore')
    .description(
      'restore a copy (osd admin backup) into a new data dir or an empty database; migrations then run at the next start. Start osd with the server key of the instance the copy was made on (OSD_SECRET_KEY, or its secret.key in the data dir): it refuses to start with one that does not open the stored secrets',
    )
    .argument('<file>', 'the copy')
    .option('--json', 'print JSON')
    .action(async (file: string, opts: { json?: boolean }) => {
      const restored = await withRawDatabase(dbFlags(), io, (sql) => restoreBackup(sql, file))
      print(opts.json ?? false, restored, () =>
        [
          `restored ${restored.file}: ${restored.tables} tables, ${restored.rows} rows, in ${restored.seconds.toFixed(1)} s`,
          `schema ${restored.migrations}; start osd with the server key of the instance it was made on`,
        ].join('\n'),
      )
    })

  const enterprise = admin.command('enterprise').description('create and list enterprises')
  enterprise
    .command('create')
    .description('create an enterprise and a token holding every scope')
    .requiredOption('--name <name>', 'display name')
    .option('--slug <slug>', 'URL name (made from the name when omitted)')
    .option(
      '--owner-email <email>',
      'a person (osd admin user create) who becomes its owner, the chief executive',
    )
    .option(
      '--password-stdin',
      'with --owner-email: the owner is a new person, whose password is read from stdin',
    )
    .option('--json', 'print JSON')
    .action(async (opts: EnterpriseCreateFlags) => {
      if (opts.passwordStdin && !opts.ownerEmail)
        throw new UsageError('--password-stdin goes with --owner-email (the new owner)')
      // Read before the database is opened: a refused password then costs nothing.
      const password = opts.passwordStdin ? await readPassword(io) : undefined
      const result = await withDatabase(dbFlags(), io, (sql, config) =>
        transaction(sql, async (tx) => {
          const { createEnterprise, createToken, setMembership } = await domain()
          const owner = opts.ownerEmail
            ? password === undefined
              ? await personByEmail(tx, opts.ownerEmail)
              : await newOwner(tx, opts.ownerEmail, password)
            : undefined
          const created = await createEnterprise(tx, { name: opts.name, slug: opts.slug }, config)
          if (owner) await setMembership(tx, created.id, owner.id, 'owner')
          const { token } = await createToken(tx, created.id, { name: 'owner', scopes: allScopes })
          return {
            enterprise: created,
            token,
            ...(owner && { owner: { id: owner.id, email: owner.email } }),
          }
        }),
      )
      print(opts.json ?? false, result, () =>
        [
          `enterprise ${result.enterprise.slug} (${result.enterprise.id}) created`,
          ...(result.owner
            ? [
                `owner: ${result.owner.email}` +
                  (password === undefined
                    ? ''
                    : `, a new person who signs in with \`osctl auth login --email ${result.owner.email}\``),
              ]
            : []),
          `token (every scope; shown once): ${result.token}`,
        ].join('\n'),
      )
    })
  enterprise
    .command('list')
    .description('list enterprises')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const rows = await withDatabase(dbFlags(), io, async (sql) =>
        (await domain()).listEnterprises(sql),
      )
      print(opts.json ?? false, rows, () =>
        rows.map((e) => `${e.slug}\t${e.id}\t${e.name}`).join('\n'),
      )
    })

  const user = admin
    .command('user')
    .description('create people who sign in with email and password')
  user
    .command('create')
    .description('create a person; the password is read from stdin, never from an argument')
    .requiredOption('--email <email>', 'the email they sign in with')
    .option('--password-stdin', 'read the password from stdin (required: arguments show in ps)')
    .option('--name <name>', 'display name')
    .option('--enterprise <slug>', 'make them a member of this enterprise')
    .option('--owner', 'with --enterprise: an owner (the chief executive), not a member')
    .option('--json', 'print JSON')
    .action(
      async (opts: {
        email: string
        passwordStdin?: boolean
        name?: string
        enterprise?: string
        owner?: boolean
        json?: boolean
      }) => {
        if (!opts.passwordStdin) throw new UsageError('--password-stdin is required')
        if (opts.owner && !opts.enterprise) throw new UsageError('--owner needs --enterprise')
        const password = await readPassword(io)
        const result = await withDatabase(dbFlags(), io, (sql) =>
          transaction(sql, async (tx) => {
            const { createUser, setMembership } = await domain()
            const membership = opts.enterprise
              ? {
                  enterpriseId: await enterpriseId(tx, opts.enterprise),
                  role: opts.owner ? ('owner' as const) : ('member' as const),
                }
              : null
            const created = await createUser(tx, { email: opts.email, password, name: opts.name })
            if (membership)
              await setMembership(tx, membership.enterpriseId, created.id, membership.role)
            return { user: created, membership }
          }),
        )
        print(opts.json ?? false, result, () =>
          [
            `person ${result.user.email} (${result.user.id}) created`,
            ...(result.membership && opts.enterprise
              ? [`${result.membership.role} of ${opts.enterprise}`]
              : []),
          ].join('\n'),
        )
      },
    )

  user
    .command('password')
    .description(
      "set a person's password (read from stdin) and end every session of theirs, e.g. when it is forgotten",
    )
    .requiredOption('--email <email>', 'the email they sign in with')
    .option('--password-stdin', 'read the new password from stdin (required)')
    .option('--json', 'print JSON')
    .action(async (opts: { email: string; passwordStdin?: boolean; json?: boolean }) => {
      if (!opts.passwordStdin) throw new UsageError('--password-stdin is required')
      const password = await readPassword(io)
      const person = await withDatabase(dbFlags(), io, async (sql) => {
        const found = await personByEmail(sql, opts.email)
        await (await domain()).setPassword(sql, found.id, password)
        return { id: found.id, email: found.email }
      })
      print(opts.json ?? false, { user: person }, () =>
        [`password of ${person.email} set; every session of theirs ended`].join('\n'),
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
    .option(
      '--expires-in-days <n>',
      'the token stops working after this many days (never unless given)',
    )
    .option('--json', 'print JSON')
    .action(
      async (opts: {
        enterprise: string
        scopes: string
        name: string
        expiresInDays?: string
        json?: boolean
      }) => {
        const days = opts.expiresInDays === undefined ? undefined : Number(opts.expiresInDays)
        if (days !== undefined && !(Number.isInteger(days) && days >= 1 && days <= 3650))
          throw new UsageError('--expires-in-days takes a whole number of days, 1 to 3650')
        const expiresAt = days === undefined ? null : new Date(Date.now() + days * 86_400_000)
        const { scopes, unknown } = parseScopes(opts.scopes)
        if (unknown.length || scopes.length === 0) {
          throw new UsageError(
            `unknown scopes: ${unknown.join(', ') || '(none given)'}; scopes are <resource>:read|write ` +
              `with resource one of ${[...new Set(allScopes.map((s) => s.split(':')[0]))].join(', ')}`,
          )
        }
        const created = await withDatabase(dbFlags(), io, async (sql) =>
          (await domain()).createToken(sql, await enterpriseId(sql, opts.enterprise), {
            name: opts.name,
            scopes,
            expiresAt,
          }),
        )
        const { id, name, token: secret } = created
        print(
          opts.json ?? false,
          { id, name, scopes: created.scopes, expiresAt: created.expiresAt, token: secret },
          () =>
            [
              `token ${id} (${name}) created` +
                (created.expiresAt ? `, expires ${created.expiresAt}` : '') +
                '; shown once:',
              secret,
            ].join('\n'),
        )
      },
    )
  token
    .command('list')
    .description("list an enterprise's tokens (never their secrets)")
    .requiredOption('--enterprise <slug>', 'enterprise slug')
    .option('--json', 'print JSON')
    .action(async (opts: { enterprise: string; json?: boolean }) => {
      const rows = await withDatabase(dbFlags(), io, async (sql) =>
        (await domain()).listTokens(sql, await enterpriseId(sql, opts.enterprise), {
          includeRevoked: true,
        }),
      )
      print(opts.json ?? false, rows, () =>
        rows
          .map((t) =>
            [
              t.id,
              t.name,
              `…${t.lastChars}`,
              t.revokedAt
                ? `revoked (${t.revokedReason})`
                : t.expiresAt && Date.parse(t.expiresAt) <= Date.now()
                  ? 'expired'
                  : 'active',
              t.expiresAt ? `expires ${t.expiresAt}` : 'never expires',
              t.lastUsedAt ? `last used ${t.lastUsedAt}` : 'never used',
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
      const revoked = await withDatabase(dbFlags(), io, async (sql) =>
        (await domain()).revokeToken(sql, await enterpriseId(sql, opts.enterprise), id),
      )
      print(opts.json ?? false, revoked, () => `token ${revoked.id} revoked`)
    })

  registerSecrets(admin, {
    withDatabase: (fn) => withDatabase(dbFlags(), io, fn),
    print,
    usage: (message) => new UsageError(message),
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
  for (const [verb, help] of [
    [
      'publish',
      'publish a task, or a role with the tasks that name it (repeating changes nothing)',
    ],
    ['unpublish', 'take a task or role out; installed clones keep their last version, detached'],
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
          const result = await withDatabase(dbFlags(), io, async (sql) =>
            (await domain())[verb](sql, await enterpriseId(sql, opts.enterprise), which),
          )
          print(opts.json ?? false, result, () => describe(result))
        },
      )
  }
}

export class UsageError extends Error {}

import { getEventListeners } from 'node:events'
import { constants } from 'node:os'
import { Command, CommanderError, Option } from 'commander'
import { ApiError } from '../shared/errors.js'
import { BackupError } from './admin/backup.js'
import {
  holdDatabase,
  registerAdmin,
  StoppedError,
  UsageError,
  type OsdIo,
} from './admin/commands.js'
import { ConfigError, loadConfig, roles, type ConfigFlags } from './config.js'
import { DataDirError } from './data-dir.js'
import { DatabaseConnectError } from './db/index.js'
import { migrate, MigrationLockError, NewerDatabaseError } from './db/migrate.js'
import { createLogger } from './log.js'
import { packageVersion } from '../shared/paths.js'

// osd's command line (bin/osd: main.ts), built by a function and without side effects at import, so
// that tests run `osd admin` and `osd migrate` in process as they run osctl (test/helpers/osd.ts).
// What the commands write and read goes through OsdIo (admin/commands.ts): the process's own streams
// in bin/osd, a test's in process. `osd serve` is the process's own matter (its signals, its logs on
// stdout, its exit).

const stopping = new AbortController()

/** The process's own streams, each touched only when written to or read; its signals (stopOnSignals). */
export const processIo: OsdIo = {
  stdout: { write: (text) => process.stdout.write(text) },
  stderr: { write: (text) => process.stderr.write(text) },
  stdin: () => process.stdin,
  stopped: stopping.signal,
}

/**
 * osd admin and osd migrate in their own process (server/main.ts): the first SIGINT or SIGTERM stops
 * the command (processIo.stopped: what it has open is closed, an embedded server it started stopped),
 * which then fails saying so, exit 1; a second exits at once. Node's default exit left the embedded
 * PostgreSQL running and a backup's partial file behind.
 */
export function stopOnSignals(): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => {
      // A second signal, or no command holding a database (the help, a password being read): as
      // Node's default would.
      if (stopping.signal.aborted || getEventListeners(stopping.signal, 'abort').length === 0)
        process.exit(128 + constants.signals[signal])
      stopping.abort(new StoppedError(`stopped by ${signal}`))
    })
}

/** osd's command tree; the commands write to `io`. */
export function buildOsd(io: OsdIo = processIo): Command {
  const program = new Command('osd')
    .description('osd: the task automation daemon')
    .version(packageVersion)
    .showHelpAfterError()
    // Commander's refusals are thrown, not exited on (set before the subcommands, which copy it):
    // failure() gives a usage error exit 2, as osd's own and osctl's are.
    .exitOverride()

  program
    .command('serve')
    .description('serve the HTTP API and run the engine')
    .option('--port <n>', 'port to listen on; 0 picks a free one (env OSD_PORT, default 8080)')
    .option('--host <host>', 'address to listen on (env OSD_HOST, default 127.0.0.1)')
    .option(
      '--data-dir <dir>',
      'data dir of the embedded PostgreSQL (env OSD_DATA_DIR, default ~/.osd)',
    )
    .addOption(new Option('--role <role>', 'what this process does (env OSD_ROLE)').choices(roles))
    .option(
      '--metrics-port <n>',
      'serve GET /metrics for Prometheus on this port; 0 picks a free one (env OSD_METRICS_PORT, default off)',
    )
    .action(async (flags: ConfigFlags) => {
      const config = loadConfig(flags)
      const log = createLogger(config.logLevel)
      // The daemon's modules (the app, the engine, the providers' SDKs) load only for serve: `osd admin`
      // and `osd migrate` start in a third of the time without them (1.4 s to 0.5 s on one core).
      const { osdCommand, startDaemon } = await import('./serve.js')
      const daemon = await startDaemon(config, log, { osd: osdCommand(process.argv[1]) })
      // The first signal drains (issue 51): streams and long-polls end at once, the requests in flight
      // finish. The second stops at once, the embedded PostgreSQL too (left running, it would hold the
      // data dir's port and files); exit 1. A third, should that stop hang, exits as it is.
      let signals = 0
      const shutdown = (signal: string) => {
        if (++signals > 2) {
          log.warn({ signal }, 'third signal: exiting now')
          log.flush(() => process.exit(1))
          return
        }
        if (signals > 1) {
          log.warn({ signal }, 'second signal: stopping at once')
          daemon.halt().then(
            () => log.flush(() => process.exit(1)),
            (err: unknown) => {
              log.error({ err }, 'stopping at once failed')
              log.flush(() => process.exit(1))
            },
          )
          return
        }
        log.info(
          { signal },
          signal === 'SIGINT'
            ? 'stopping: finishing the requests in flight; press Ctrl+C again to stop at once'
            : `stopping: finishing the requests in flight; send ${signal} again to stop at once`,
        )
        // Said at once, as the start is (serve.ts): the person who pressed Ctrl+C reads what happens.
        log.flush()
        daemon.stop().then(
          () => log.flush(() => process.exit(0)),
          (err: unknown) => {
            log.error({ err }, 'shutdown failed')
            log.flush(() => process.exit(1))
          },
        )
      }
      process.on('SIGTERM', () => shutdown('SIGTERM'))
      process.on('SIGINT', () => shutdown('SIGINT'))
    })

  program
    .command('migrate')
    .description('apply pending database migrations')
    .option('--data-dir <dir>', 'data dir of the embedded PostgreSQL (env OSD_DATA_DIR)')
    .action(async (flags: ConfigFlags) => {
      const config = loadConfig(flags)
      const log = createLogger(config.logLevel, io.stderr)
      await holdDatabase(
        config,
        log,
        io,
        { max: 1, applicationName: 'osd migrate' },
        async (sql) => {
          const applied = await migrate(sql, undefined, { log })
          io.stdout.write(applied.length ? `applied ${applied.join(', ')}\n` : 'nothing to apply\n')
        },
      )
    })

  registerAdmin(
    program
      .command('admin')
      .description(
        'operator bootstrap and care: enterprises, people, tokens, secret keys, retention, backups',
      ),
    io,
  )
  return program
}

/**
 * Runs osd's command line `args` (what follows `osd`) on `program`; answers the exit code. `osd` alone
 * asked for nothing but the help: on stdout, exit 0, as `osctl` alone (commander would write it to
 * stderr and exit 1).
 */
export async function runOsd(
  program: Command,
  args: string[],
  stderr: OsdIo['stderr'] = processIo.stderr,
): Promise<number> {
  if (args.length === 0) {
    program.outputHelp()
    return 0
  }
  try {
    await program.parseAsync(args, { from: 'user' })
    return 0
  } catch (err) {
    return failure(err, stderr)
  }
}

/** A failed command's exit code, its words said on `stderr`. */
export function failure(err: unknown, stderr: OsdIo['stderr'] = processIo.stderr): number {
  // Commander has said its words already: the help or the version asked for (a group named without
  // its command, `osd admin`, asks for its help, as `osctl runs` does), or a usage error.
  if (err instanceof CommanderError)
    return ['commander.helpDisplayed', 'commander.version', 'commander.help'].includes(err.code)
      ? 0
      : 2
  if (err instanceof ApiError) {
    stderr.write(`error: ${err.code}: ${err.message}\n`)
    return 1
  }
  // A database osd cannot connect to, that a newer osd migrated or whose tables a migration could not
  // lock, a backup that cannot be made or read, a data dir on a full disk: the message says what to
  // do; a stack would bury it.
  if (
    err instanceof DatabaseConnectError ||
    err instanceof NewerDatabaseError ||
    err instanceof MigrationLockError ||
    err instanceof BackupError ||
    err instanceof DataDirError ||
    err instanceof StoppedError
  ) {
    stderr.write(`error: ${err.message}\n`)
    return 1
  }
  if (err instanceof UsageError || err instanceof ConfigError) {
    stderr.write(`error: ${err.message}\n`)
    return 2
  }
  stderr.write(`error: ${(err as Error).stack ?? String(err)}\n`)
  return 1
}

import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable, Writable } from 'node:stream'
import { expect } from 'vitest'
import { makeDeps } from '../../cli/deps.js'
import { loadProfileStore } from '../../cli/profiles.js'
import { makeOutput } from '../../cli/output.js'
import { buildProgram } from '../../cli/program.js'
import { report } from '../../cli/report.js'
import { loadConfig } from '../../server/config.js'
import type { Logger } from '../../server/log.js'
import { startDaemon, type DaemonOptions, type Running } from '../../server/serve.js'
import { createTestEnterprise, silentLog, type TestEnterprise } from './app.js'
import { createTestDatabase, type TestDatabase } from './db.js'
import { afterFile } from './after-file.js'
import { commanderOutputTo, environment, runEnv } from './run-env.js'

// osctl in process (STYLE: CLI actions are tested in process; issue 28): the command tree that
// bin/osctl runs, built and parsing a command line as cli/run.ts does (the modules of the command it
// names, stubs for the others), with osctl's own deps (profile store, target, HTTP client), against a
// real daemon that this process serves. What only a process can show (pipes, a pseudo-terminal, a
// restart of osd, the binary's start) keeps the real binary: test/helpers/processes.ts.
//
// What osctl takes from its process is given per run, as a spawned osctl would have had it:
// - stdout and stderr (osctl's and commander's) are captured; neither is a terminal;
// - stdin is the `input` given, else empty (a closed stdin); no terminal to ask a question on;
// - the environment is the test process's with NO_COLOR=1 and the run's own variables laid over it.
//   osctl reads process.env where it needs it (the profile store's dir, OSCTL_URL/TOKEN/PROFILE), so
//   each run sees an environment of its own through AsyncLocalStorage: runs that overlap (a waiter
//   and the osctl that cancels its run) never see each other's, and nothing is left set afterwards.
// - the exit code is what cli/run.ts would set, never process.exitCode.

export interface OsctlResult {
  exitCode: number
  /** Everything written, final newline included (execa dropped it; here it is kept). */
  stdout: string
  stderr: string
  /** stdout and stderr as one terminal shows them: every write in the order it was made. */
  output: string
}

export interface OsctlRun extends Promise<OsctlResult> {
  /** What the run has written so far, while it runs (a waiter following a run, say). */
  printed(): { stdout: string; stderr: string; output: string }
}

export interface OsctlOptions {
  /**
   * stdout and stderr are a terminal (100 columns) as a person at one has them: tables fitted, local
   * times, the end of a wait summed up, a spinner on stderr. Still no colour (NO_COLOR), and no
   * terminal to type a password on.
   */
  terminal?: boolean
}

/**
 * `osctl ARGS` in this process, as `node bin/osctl ARGS` with `env` added to its environment and
 * `input` on its stdin; never throws on a non-zero exit.
 */
export function osctl(
  args: string[],
  env: Record<string, string | undefined> = {},
  input?: string,
  options: OsctlOptions = {},
): OsctlRun {
  const own = environment({ NO_COLOR: '1', ...env })
  let stdout = ''
  let stderr = ''
  let output = ''
  const io = {
    stdout: { write: (text: string) => void ((stdout += text), (output += text)) },
    stderr: { write: (text: string) => void ((stderr += text), (output += text)) },
  }
  const tty = Boolean(options.terminal)
  // Streams that are not terminals: confirm() and password() find nobody to ask, as with pipes.
  const terminal = {
    stdin: Readable.from([]),
    stderr: new Writable({ write: (_chunk, _encoding, done) => done() }),
  }
  const run = runEnv.run(own, async (): Promise<OsctlResult> => {
    const argv = ['node', 'osctl', ...args]
    // The profile store loaded whatever the command (the binary loads it only for commands that read
    // a profile: cli/deps.ts loadDeps; test/cli/base.test.ts holds that as a process).
    await loadProfileStore()
    const program = await buildProgram((globals) => {
      const deps = makeDeps(globals, terminal)
      // As osctl's own (cli/output.ts): what a person reads shows control characters escaped.
      const out = makeOutput(
        { json: Boolean(globals.json), isTTY: tty, errorIsTTY: tty, color: false, columns: 100 },
        io.stdout.write,
        io.stderr.write,
      )
      return { ...deps, out, stdin: async () => input ?? '' }
    }, argv)
    commanderOutputTo(program, io)
    let exitCode = 0
    try {
      await program.parseAsync(argv)
    } catch (err) {
      exitCode = report(err, Boolean(program.opts().json), io)
    }
    return { exitCode, stdout, stderr, output }
  })
  return Object.assign(run, { printed: () => ({ stdout, stderr, output }) })
}

export interface CliDaemon {
  /** The daemon's base URL, ending in /v1. */
  daemon: { url: string }
  db: TestDatabase
  /** The enterprise osctl acts as; its token holds every scope. */
  enterprise: TestEnterprise
  /** osctl's environment: a config dir of its own, the daemon's URL and the enterprise's token. */
  env: Record<string, string>
  /** osctl --json in process: exit 0 and stdout that is JSON and nothing else. */
  json(args: string[], input?: string): Promise<any>
}

/**
 * What an osctl test file runs against: a real daemon, served over HTTP by this process as `osd serve`
 * serves it (server/serve.ts: the app, its engine, the service catalogue), on a database of the file's
 * own with one enterprise. `daemonEnv` is the daemon's environment added to this process's (fake
 * providers' URLs, say). The daemon stops after the file.
 */
export async function startCliDaemon(
  enterpriseName: string,
  daemonEnv: Record<string, string> = {},
): Promise<CliDaemon> {
  const db = await createTestDatabase()
  const enterprise = await createTestEnterprise(db.sql, enterpriseName, { mailDomain: 'osd.local' })
  const running = await serveInProcess(db, daemonEnv)
  afterFile(() => running.stop())
  const env = {
    OSCTL_CONFIG_DIR: await mkdtemp(join(tmpdir(), 'osctl-')),
    OSCTL_URL: running.url!,
    OSCTL_TOKEN: enterprise.token,
  }
  return {
    daemon: { url: running.url! },
    db,
    enterprise,
    env,
    async json(args, input) {
      const res = await osctl(['--json', ...args], env, input)
      expect(res.exitCode, res.stderr).toBe(0)
      return JSON.parse(res.stdout)
    },
  }
}

/**
 * `osd serve` in this process (server/serve.ts, as bin/osd runs it) on the file's database `db`, on a
 * free port, with `daemonEnv` added to this process's environment and a data dir of its own. The
 * caller stops it. `log` receives its log lines (none by default).
 */
export async function serveInProcess(
  db: Pick<TestDatabase, 'url'>,
  daemonEnv: Record<string, string> = {},
  log: Logger = silentLog,
  options: DaemonOptions = {},
): Promise<Running> {
  // The daemon runs in an environment of its own, as a process would: what it reads of process.env
  // then (its server key, say), and later from its requests and its engine, is this.
  const daemonEnvironment = environment({
    DATABASE_URL: db.url,
    OSD_DATA_DIR: await mkdtemp(join(tmpdir(), 'osd-data-')),
    ...daemonEnv,
  })
  return runEnv.run(daemonEnvironment, () =>
    startDaemon(loadConfig({ port: 0, host: '127.0.0.1' }, daemonEnvironment), log, options),
  )
}

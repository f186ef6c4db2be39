import { Readable } from 'node:stream'
import type { OsdIo } from '../../server/admin/commands.js'
import { buildOsd, runOsd } from '../../server/cli.js'
import { passwordCost } from '../../server/domain/people/index.js'
import { commanderOutputTo, environment, runEnv } from './run-env.js'

// osd's commands in process (STYLE: CLI actions are tested in process; issue 40), as osctl's are
// (test/helpers/osctl.ts): the command tree bin/osd runs (server/cli.ts), parsing a command line, its
// failures turned into an exit code as server/main.ts does. A real `node bin/osd admin ...` costs
// 0.6-0.7 s of a core, almost all of it loading modules, which in process load once per worker. What
// only a process can show (the binary's start and wiring, `osd serve`, its signals) keeps the real
// binary: test/helpers/processes.ts.
//
// What osd takes from its process is given per run, as a spawned osd would have had it:
// - stdout and stderr (osd's and commander's) are captured;
// - stdin is the `input` given, else empty (a closed stdin), never a terminal;
// - the environment is the test process's with the run's own variables laid over it, seen through
//   process.env by the run's code only (test/helpers/run-env.ts): DATABASE_URL and the secret keys of
//   one run never reach another run or the worker;
// - the cost of new password hashes, which osd admin sets from OSD_PASSWORD_COST as its process's
//   own, is the worker's again once the last run under way ends (runs that overlap share it: give them
//   one cost);
// - the exit code is what server/main.ts would exit with, never process.exit or process.exitCode.

export interface OsdResult {
  exitCode: number
  /** What was written, without the final line break, as execa answers. */
  stdout: string
  stderr: string
}

/** Runs under way, and the worker's cost of new password hashes before the first of them. */
let running = 0
let workerCost = passwordCost.log2N

/** Drops one final line break, as execa does. */
const stripFinalNewline = (text: string) => text.replace(/\r?\n$/, '')

/**
 * `osd ARGS` in this process, as `node bin/osd ARGS` with `env` added to its environment and `input`
 * on its stdin; never throws on a non-zero exit. Not `osd serve`: test/helpers/osctl.ts
 * serveInProcess serves in process, test/helpers/processes.ts startOsd as a process.
 */
export async function osd(
  args: string[],
  env: Record<string, string | undefined> = {},
  input?: string,
): Promise<OsdResult> {
  if (args[0] === 'serve') throw new Error('osd serve in process: serveInProcess (helpers/osctl)')
  let stdout = ''
  let stderr = ''
  const io: OsdIo = {
    stdout: { write: (text: string) => void (stdout += text) },
    stderr: { write: (text: string) => void (stderr += text) },
    stdin: () => Readable.from(input === undefined ? [] : [Buffer.from(input)]),
  }
  if (running++ === 0) workerCost = passwordCost.log2N
  return runEnv.run(environment(env), async () => {
    const program = buildOsd(io)
    commanderOutputTo(program, io)
    let exitCode: number
    try {
      exitCode = await runOsd(program, args, io.stderr)
    } finally {
      if (--running === 0) passwordCost.log2N = workerCost
    }
    return { exitCode, stdout: stripFinalNewline(stdout), stderr: stripFinalNewline(stderr) }
  })
}

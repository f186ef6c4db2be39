import type { Command } from 'commander'
import { describe, expect, it } from 'vitest'
import { buildProgram } from '../../cli/program.js'
import { report } from '../../cli/report.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'

// Usage errors of osctl in process (issue 27): the command tree built and parsing a command line as
// run.ts does, commander's output and the report of run.ts captured, the client a fake that records
// what would have been sent. A typo is one line and where to read more, exit 2, never the whole help.

/** Every command of the tree, the program first. */
function commands(command: Command): Command[] {
  return [command, ...command.commands.flatMap(commands)]
}

/** `osctl ARGS`: the exit code, what was printed, and the requests the client was asked to send. */
async function osctl(args: string[]) {
  const api = new FakeApi(() => ({ status: 500, body: { error: 'unexpected', message: 'sent' } }))
  const f = fakeDeps(api)
  const argv = ['node', 'osctl', ...args]
  const program = await buildProgram(() => f.deps, argv)
  let stdout = ''
  let stderr = ''
  const io = {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  }
  for (const c of commands(program))
    c.configureOutput({ writeOut: io.stdout.write, writeErr: io.stderr.write })
  let code = 0
  try {
    await program.parseAsync(argv)
  } catch (err) {
    code = report(err, Boolean(program.opts().json), io)
  }
  return { code, stdout: stdout + f.stdout(), stderr: stderr + f.stderr(), sent: api.sent }
}

describe('a typo', () => {
  it.each([
    [
      ['taks', 'list'],
      'error: unknown command "taks" (did you mean "tasks"?)\nrun "osctl --help" for the commands\n',
    ],
    [
      ['tasks', 'lst'],
      'error: unknown command "lst" for "osctl tasks" (did you mean "list"?)\n' +
        'run "osctl tasks --help" for the commands\n',
    ],
    [
      ['no-such-command'],
      'error: unknown command "no-such-command"\nrun "osctl --help" for the commands\n',
    ],
    [
      ['runs', 'list', '--limt', '3'],
      'error: unknown option "--limt" (did you mean "--limit"?)\n' +
        'run "osctl runs list --help" for the options\n',
    ],
    [
      ['--jsno', 'health'],
      'error: unknown option "--jsno" (did you mean "--json"?)\nrun "osctl --help" for the options\n',
    ],
  ])('osctl %j: one line, a pointer to the help, exit 2', async (args, said) => {
    const res = await osctl(args)
    expect(res).toEqual({ code: 2, stdout: '', stderr: said, sent: [] })
  })

  it('names every command that is near, and none when none is', async () => {
    const res = await osctl(['memry', 'list'])
    expect(res.stderr.split('\n')[0]).toBe(
      'error: unknown command "memry" (did you mean "memory"?)',
    )
    const two = await osctl(['runs', 'art', 'x'])
    expect(two.stderr.split('\n')[0]).toBe(
      'error: unknown command "art" for "osctl runs" (did you mean one of "start", "wait"?)',
    )
    const none = await osctl(['runs', 'zzz'])
    expect(none.stderr.split('\n')[0]).toBe('error: unknown command "zzz" for "osctl runs"')
  })
})

describe('other usage errors', () => {
  it.each([
    [
      ['profile', 'use'],
      'error: missing required argument "name"\nrun "osctl profile use --help" for its usage\n',
    ],
    [
      ['runs', 'wait', 'a', 'b'],
      'error: too many arguments for "osctl runs wait". Expected 1 argument but got 2.\n' +
        'run "osctl runs wait --help" for its usage\n',
    ],
    [
      ['memory', 'train'],
      'error: required option "--layer <layer>" not specified\n' +
        'run "osctl memory train --help" for its usage\n',
    ],
  ])('osctl %j: the same, one line and a pointer, exit 2', async (args, said) => {
    expect(await osctl(args)).toEqual({ code: 2, stdout: '', stderr: said, sent: [] })
  })

  it('a refused flag value names the choices on its one line', async () => {
    const res = await osctl(['runs', 'list', '--status', 'nope'])
    expect(res.code).toBe(2)
    expect(res.stderr).toMatch(
      /^error: option "--status <status>" argument "nope" is invalid\. Allowed choices are pending, .*\.\nrun "osctl runs list --help" for its usage\n$/,
    )
  })

  it('refuses bad flags and arguments before calling the API', async () => {
    for (const args of [
      ['runs', 'start', 'echo', '--timeout', '5'],
      ['runs', 'start', 'echo', '--input', 'novalue'],
      ['runs', 'list', '--limit', '0'],
      ['runs', 'wait', 'not-an-id'],
      ['tasks', 'list', '--all', '--page', '2'],
      // An unset variable in a script gives an empty value: that is no timeout, not zero seconds.
      ...['', ' ', 'abc', '-1'].map((t) => ['runs', 'start', 'echo', '--wait', '--timeout', t]),
    ]) {
      const res = await osctl(args)
      expect([res.code, res.sent], args.join(' ')).toEqual([2, []])
      expect(res.stderr, args.join(' ')).toMatch(/^error: [^\n]+\n$/)
    }
    // An input must be an object; null is not "no input".
    const nothing = await osctl(['runs', 'start', 'echo', '-d', 'null'])
    expect(nothing).toMatchObject({ code: 2, sent: [] })
    expect(nothing.stderr).toContain('the input must be a JSON object')
  })

  it('--help still prints the help, exit 0', async () => {
    const res = await osctl(['enterprise', 'concurrency', 'set', '--help'])
    expect(res.code).toBe(0)
    expect(res.stdout).toContain('Examples:')
  })
})

import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { confirmDestructive } from '../../cli/command.js'
import { makeDeps } from '../../cli/deps.js'
import { CliError, exitCodes } from '../../cli/errors.js'

// A destructive verb asks only where its question can be both seen (stderr) and answered (stdin);
// otherwise it needs --yes. In process, with osctl's own deps on a terminal of streams made here.

/** A stream standing in for stdin or stderr, a terminal or not; `typed` is what the user types. */
function stream(isTTY: boolean, typed?: string) {
  const s = Object.assign(new PassThrough(), { isTTY })
  if (typed !== undefined) s.end(typed)
  return s
}

async function confirmOn(stdinTTY: boolean, stderrTTY: boolean, typed = '') {
  const stdin = stream(stdinTTY, typed)
  const stderr = stream(stderrTTY)
  let asked = ''
  stderr.on('data', (chunk: Buffer) => (asked += chunk.toString()))
  const deps = makeDeps({}, { stdin, stderr })
  const outcome = await confirmDestructive(deps, undefined, 'Delete task nightly').then(
    () => 'confirmed',
    (err: unknown) => err,
  )
  return { outcome, asked }
}

const refusal = (err: unknown) => {
  expect(err).toBeInstanceOf(CliError)
  expect((err as CliError).exitCode).toBe(exitCodes.usage)
  expect((err as CliError).message).toBe(
    'Delete task nightly: refusing without --yes when not on a terminal',
  )
}

describe('confirmDestructive', () => {
  it('asks when stdin and stderr are both terminals, and takes the answer', async () => {
    const yes = await confirmOn(true, true, 'y\n')
    expect(yes.asked).toContain('Delete task nightly? [y/N] ')
    expect(yes.outcome).toBe('confirmed')
    const no = await confirmOn(true, true, 'n\n')
    expect((no.outcome as CliError).message).toBe('cancelled')
    expect((no.outcome as CliError).exitCode).toBe(exitCodes.usage)
  })

  it('does not ask with stdin a terminal but stderr not one: it needs --yes', async () => {
    const { outcome, asked } = await confirmOn(true, false, 'y\n')
    refusal(outcome)
    expect(asked).toBe('')
  })

  it('does not ask with stdin not a terminal: it needs --yes', async () => {
    const { outcome, asked } = await confirmOn(false, true, 'y\n')
    refusal(outcome)
    expect(asked).toBe('')
  })

  it('goes ahead with --yes without asking', async () => {
    const deps = makeDeps({}, { stdin: stream(false), stderr: stream(false) })
    await expect(confirmDestructive(deps, true, 'Delete task nightly')).resolves.toBeUndefined()
  })
})

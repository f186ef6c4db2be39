import { describe, expect, it } from 'vitest'
import type { Output } from '../../cli/output.js'
import { elapsed, startSpinner } from '../../cli/spinner.js'

describe('elapsed', () => {
  it('reads as seconds, minutes or hours', () => {
    expect(elapsed(9_400)).toBe('9s')
    expect(elapsed(125_000)).toBe('2m05s')
    expect(elapsed(3_720_000)).toBe('1h02m')
  })
})

function capture(errorIsTTY: boolean) {
  let stderr = ''
  const out: Output = {
    json: false,
    isTTY: false,
    errorIsTTY,
    color: false,
    columns: 80,
    write: () => undefined,
    error: (text) => void (stderr += text),
  }
  return { out, stderr: () => stderr }
}

describe('startSpinner', () => {
  it('writes lines as they are and nothing else when stderr is not a terminal', () => {
    const { out, stderr } = capture(false)
    const spinner = startSpinner(out, 'run 1')
    spinner.update('run 1 running')
    spinner.line('09:30:00  run.running')
    spinner.stop()
    expect(stderr()).toBe('09:30:00  run.running\n')
  })

  it('on a terminal keeps its line last, with the status and elapsed time, and clears it', () => {
    const { out, stderr } = capture(true)
    let clock = 0
    const spinner = startSpinner(out, 'run 1', () => clock)
    clock = 3_000
    spinner.update('run 1 running')
    spinner.line('09:30:00  run.running')
    spinner.stop()
    expect(stderr()).toBe(
      '\r\x1b[K⠋ run 1  0s' +
        '\r\x1b[K09:30:00  run.running\n' +
        '\r\x1b[K⠙ run 1 running  3s' +
        '\r\x1b[K',
    )
  })
})

import { describe, expect, it } from 'vitest'
import { formatEvent, summarisePayload } from '../../cli/events.js'
import { ApiRequestError, CliError } from '../../cli/errors.js'
import {
  bold,
  clearLine,
  colour,
  makeOutput,
  printFields,
  printTable,
  type OutputSettings,
} from '../../cli/output.js'
import { report } from '../../cli/report.js'
import { safeOutput, safeText } from '../../cli/safe-text.js'
import { startSpinner } from '../../cli/spinner.js'
import { expectNoRawControls, hostile, hostileShown } from '../helpers/hostile-text.js'

// Terminal injection (issue 41): what osctl writes for a person shows the server's control characters
// as escapes. The shared pieces here; the commands against a daemon in hostile-output.test.ts, the ink
// screens in tui/.

describe('safeText', () => {
  it('writes C0, DEL, C1 and the bidi controls as JSON escapes, and nothing else', () => {
    expect(safeText(hostile)).toBe(hostileShown)
    expect(safeText('a\x00b\x7fc\x85d\u2066e\u2069')).toBe(
      'a\\u0000b\\u007fc\\u0085d\\u2066e\\u2069',
    )
    expect(safeText('line\nnext\ttab\rback')).toBe('line\\nnext\\ttab\\rback')
    // Other text is left as it is: accents, CJK, emoji, the bidi marks a right-to-left text uses.
    const plain = 'Zoë 東京 🚀 \u200fשלום\u200e a\\u001b b'
    expect(safeText(plain)).toBe(plain)
  })

  it('keeps line breaks and tabs of free text; a Windows line break is a line break, a lone CR not', () => {
    expect(safeText('one\r\ntwo\n\tthree\rfour\x1b[2J', { multiline: true })).toBe(
      'one\ntwo\n\tthree\\rfour\\u001b[2J',
    )
  })

  it('is the same twice over, and JSON reads its escapes back as the text', () => {
    expect(safeText(safeText(hostile))).toBe(safeText(hostile))
    expect(JSON.parse(`"${safeText(hostile)}"`)).toBe(hostile)
    const json = JSON.stringify({ name: hostile }, null, 2)
    expect(JSON.parse(safeText(json, { multiline: true }))).toEqual({ name: hostile })
  })
})

describe('safeOutput', () => {
  it("lets osctl's own sequences through whole and escapes the rest", () => {
    const own = ['\x1b[1m', '\x1b[22m']
    expect(safeOutput(`\x1b[1mTEAM\x1b[22m ${hostile}\n`, own)).toBe(
      `\x1b[1mTEAM\x1b[22m ${hostileShown}\n`,
    )
    expect(safeOutput('\x1b[31mred\x1b[39m', own)).toBe('\\u001b[31mred\\u001b[39m')
  })
})

function output(settings: Partial<OutputSettings> = {}) {
  let stdout = ''
  let stderr = ''
  const out = makeOutput(
    { json: false, isTTY: false, errorIsTTY: false, color: false, columns: 100, ...settings },
    (t) => void (stdout += t),
    (t) => void (stderr += t),
  )
  return { out, stdout: () => stdout, stderr: () => stderr }
}

describe('makeOutput', () => {
  it("escapes what is written for a person, on stdout and stderr; --json's stdout is left alone", () => {
    const human = output()
    human.out.write(`team ${hostile}\n`)
    human.out.error(`error: ${hostile}\n`)
    expect(human.stdout()).toBe(`team ${hostileShown}\n`)
    expect(human.stderr()).toBe(`error: ${hostileShown}\n`)

    const json = output({ json: true })
    const body = JSON.stringify({ name: hostile }, null, 2) + '\n'
    json.out.write(body)
    json.out.error(`note: ${hostile}\n`)
    expect(json.stdout()).toBe(body)
    expect(json.stderr()).toBe(`note: ${hostileShown}\n`)
  })

  it('passes colour only when it colours, and the spinner clearing its line only on a terminal', () => {
    const coloured = output({ color: true, isTTY: true })
    coloured.out.write(`${colour(coloured.out, 'red', 'failed')} \x1b[32mserver\x1b[39m\n`)
    expect(coloured.stdout()).toBe('\x1b[31mfailed\x1b[39m \x1b[32mserver\x1b[39m\n')
    coloured.out.write(`${hostile}\n`)
    expect(coloured.stdout()).toContain(hostileShown)

    const plain = output()
    plain.out.write('\x1b[32mserver\x1b[39m\n')
    expect(plain.stdout()).toBe('\\u001b[32mserver\\u001b[39m\n')

    const terminal = output({ errorIsTTY: true })
    const spinner = startSpinner(terminal.out, 'run 1', () => 0)
    spinner.line(`09:30:00  run.failed  reason=${hostile}`)
    spinner.stop()
    expect(terminal.stderr()).toContain(
      `${clearLine}09:30:00  run.failed  reason=${hostileShown}\n`,
    )
    const piped = output()
    piped.out.error(`${clearLine}x\n`)
    expect(piped.stderr()).toBe('\\r\\u001b[Kx\n')
  })
})

describe('tables and detail views', () => {
  const rows = [
    { name: hostile, status: 'failed', id: '0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10' },
    { name: 'Platform', status: 'succeeded', id: '7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f' },
  ]

  it('count widths on the escaped text, so the columns line up, coloured or not', () => {
    for (const color of [false, true]) {
      const { out, stdout } = output({ color, isTTY: true, columns: 120 })
      printTable(out, rows, [
        { header: 'NAME', value: (r) => r.name },
        {
          header: 'STATUS',
          value: (r) => colour(out, r.status === 'failed' ? 'red' : 'green', r.status),
        },
        { header: 'ID', value: (r) => r.id },
      ])
      const lines = stdout()
        .replace(/\x1b\[\d+m/g, '')
        .trimEnd()
        .split('\n')
      expect(lines[1]).toBe(`${hostileShown}  failed     ${rows[0]!.id}`)
      const at = lines.map((l) => l.search(/[0-9a-f]{8}-|ID/))
      expect(new Set(at).size, lines.join('\n')).toBe(1)
      expectNoRawControls(stdout().replace(/\x1b\[\d+m/g, ''))
    }
  })

  it('cut a long escaped cell on a narrow terminal and keep its colour around the cut', () => {
    const { out, stdout } = output({ color: true, isTTY: true, columns: 50 })
    printTable(
      out,
      [{ name: `${hostile} and more words`, id: rows[0]!.id }],
      [
        { header: 'NAME', value: (r) => colour(out, 'yellow', r.name) },
        { header: 'ID', value: (r) => r.id },
      ],
    )
    const row = stdout().split('\n')[1]!
    expect(row).toBe(`\x1b[33m${hostileShown.slice(0, 11)}…\x1b[39m  ${rows[0]!.id}`)
  })

  it('keep the line breaks of a value under it, so no line of it reads as a label', () => {
    const { out, stdout } = output()
    printFields(out, [
      ['name', hostile],
      ['reason', `It failed.\nstatus  succeeded\r\n\tsee ${hostile}`],
      ['status', bold(out, 'failed')],
    ])
    expect(stdout()).toBe(
      [
        `name    ${hostileShown}`,
        'reason  It failed.',
        '        status  succeeded',
        `        \tsee ${hostileShown}`,
        'status  failed',
        '',
      ].join('\n'),
    )
  })
})

describe('event lines and errors', () => {
  it('escape a payload before it is measured, JSON-quoted or bare', () => {
    const line = formatEvent(
      {
        id: 'e1',
        type: 'run.failed',
        payload: { reason: `${hostile} x`, tool: '\x1b[2J' },
        createdAt: '2026-11-22T09:30:00.000Z',
      },
      { isTTY: false },
    )
    expect(line).toBe(
      `2026-11-22T09:30:00.000Z  run.failed              reason="${hostileShown} x" tool=\\u001b[2J`,
    )
    const long = summarisePayload({ reason: hostile.repeat(10) }, 100)
    expect(long).toHaveLength(100)
    expectNoRawControls(long)
  })

  it("escape the server's words in an error, its line breaks kept", () => {
    let stderr = ''
    const io = { stdout: { write: () => true }, stderr: { write: (t: string) => (stderr += t) } }
    report(new ApiRequestError(400, 'invalid_slug', `got "${hostile}".`, {}), false, io)
    report(new CliError(`run 1 failed: ${hostile}\nsecond line`), false, io)
    expect(stderr).toBe(
      [
        `error: invalid_slug: got "${hostileShown}". (400)`,
        `error: run 1 failed: ${hostileShown}`,
        'second line',
        '',
      ].join('\n'),
    )
  })
})

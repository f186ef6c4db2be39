import { describe, expect, it } from 'vitest'
import { cappedFetch, textOfCut } from '../../../server/engine/tools/answers.js'

// The bound on a tool server's answers (issue 44, item 2) on its own, for the shapes a server may
// answer in: a JSON body, an event stream, an error. The whole path (the fake tool server, a run and a
// chat) is test/server/engine/tool-results.test.ts.

const cap = 1_000
const notice = `[osd cut this tool result at ${cap} bytes; the tool sent more]`
const call = JSON.stringify({
  jsonrpc: '2.0',
  id: 7,
  method: 'tools/call',
  params: { name: 'x', arguments: {} },
})
const list = JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/list' })

/** A server's answer, its body in these chunks; `cancelled` tells whether the reader stopped early. */
function answer(chunks: string[], init: { status?: number; type?: string } = {}) {
  const state = { cancelled: false, read: 0 }
  const encoder = new TextEncoder()
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = chunks[state.read++]
      if (next === undefined) controller.close()
      else controller.enqueue(encoder.encode(next))
    },
    cancel() {
      state.cancelled = true
    },
  })
  const response = new Response(body, {
    status: init.status ?? 200,
    headers: { 'content-type': init.type ?? 'application/json' },
  })
  return { state, fetch: async () => response }
}

const result = (text: string, id = 7) =>
  JSON.stringify({ result: { content: [{ type: 'text', text }] }, jsonrpc: '2.0', id })

/** `text` in pieces of `size` characters. */
const pieces = (text: string, size: number) =>
  Array.from({ length: Math.ceil(text.length / size) }, (_, i) =>
    text.slice(i * size, (i + 1) * size),
  )

describe('a tool result as one JSON body', () => {
  it('passes whole up to the cap', async () => {
    const body = result('short')
    const served = answer(pieces(body, 10))
    const res = await cappedFetch(served.fetch, cap)('http://tools.test/mcp', { body: call })
    expect(await res.text()).toBe(body)
  })

  it('past the cap: the server is no longer read, and the SDK gets a result of the first part and the notice', async () => {
    const cuts: unknown[] = []
    const served = answer(pieces(result('a"\\é'.repeat(10_000)), 100))
    const res = await cappedFetch(served.fetch, cap, (cut) => cuts.push(cut))(
      'http://tools.test/mcp',
      { body: call },
    )
    const parsed = JSON.parse(await res.text())
    expect(parsed).toMatchObject({ jsonrpc: '2.0', id: 7 })
    const text: string = parsed.result.content[0].text
    expect(text.endsWith(`\n${notice}`)).toBe(true)
    expect(text.startsWith('a"\\éa"\\é')).toBe(true)
    expect(Buffer.byteLength(text)).toBeLessThan(cap + notice.length + 2)
    expect(served.state.cancelled).toBe(true)
    expect(served.state.read).toBeLessThan(20)
    expect(cuts).toEqual([{ method: 'tools/call', maxBytes: cap }])
  })

  it('another answer may be larger, to its own bound, past which it fails', async () => {
    const tools = result('t'.repeat(5_000), 8)
    const fine = answer(pieces(tools, 1000))
    const res = await cappedFetch(fine.fetch, cap)('http://tools.test/mcp', { body: list })
    expect(await res.text()).toBe(tools)
    const huge = answer(pieces(result('t'.repeat(2_000_000), 8), 64_000))
    const failing = await cappedFetch(huge.fetch, cap)('http://tools.test/mcp', { body: list })
    await expect(failing.text()).rejects.toThrow(/more than 1000000 bytes/)
    expect(huge.state.cancelled).toBe(true)
  })

  it("an error answer's text is kept short", async () => {
    const served = answer(pieces('e'.repeat(100_000), 1000), { status: 500, type: 'text/plain' })
    const res = await cappedFetch(served.fetch, cap)('http://tools.test/mcp', { body: call })
    expect(res.status).toBe(500)
    expect((await res.text()).length).toBe(16_000)
    expect(served.state.cancelled).toBe(true)
  })
})

describe('a tool result over an event stream', () => {
  it('passes events as they complete, up to the cap', async () => {
    const events = `event: message\ndata: {"method":"notifications/progress","jsonrpc":"2.0"}\n\nevent: message\ndata: ${result('ok')}\n\n`
    const served = answer(pieces(events, 7), { type: 'text/event-stream' })
    const res = await cappedFetch(served.fetch, cap)('http://tools.test/mcp', { body: call })
    expect(await res.text()).toBe(events)
  })

  it('past the cap: the event under way becomes the cut result, after the whole events before it', async () => {
    const progress = `event: message\ndata: {"method":"notifications/progress","jsonrpc":"2.0"}\n\n`
    const big = `event: message\ndata: ${result('x'.repeat(50_000))}\n\n`
    const served = answer(pieces(progress + big, 64), { type: 'text/event-stream' })
    const res = await cappedFetch(served.fetch, cap)('http://tools.test/mcp', { body: call })
    const text = await res.text()
    expect(text.startsWith(progress)).toBe(true)
    const last = JSON.parse(text.slice(progress.length).replace(/^event: message\ndata: /, ''))
    expect(last).toMatchObject({ jsonrpc: '2.0', id: 7 })
    expect(last.result.content[0].text).toMatch(/^x+\n\[osd cut this tool result at 1000 bytes/)
    expect(served.state.cancelled).toBe(true)
  })

  it("the session's own stream may run on, each event to the wider bound", async () => {
    const small = `event: message\ndata: ${'s'.repeat(900)}\n\n`
    const served = answer(
      Array.from({ length: 1_200 }, () => small),
      { type: 'text/event-stream' },
    )
    const res = await cappedFetch(served.fetch, cap)('http://tools.test/mcp', {})
    expect((await res.text()).length).toBe(1_200 * small.length)
  })
})

describe('textOfCut', () => {
  it('reads the text parts of a cut answer, escapes and all, up to the cut', () => {
    expect(
      textOfCut('{"result":{"content":[{"type":"text","text":"one\\ntwo \\"q\\" \\u00e9"},'),
    ).toBe('one\ntwo "q" é')
    expect(
      textOfCut('{"content":[{"type":"text", "text" : "a"},{"type":"text","text":"b\\u00'),
    ).toBe('a\nb')
    expect(textOfCut('{"content":[{"type":"image","data":"AAAA')).toBe('')
  })
})

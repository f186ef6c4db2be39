import { describe, expect, it, vi } from 'vitest'
import { apiError } from '../../../cli/client.js'
import type { ChatEvent, OpenChatEvents } from '../../../cli/tui/chat-events.js'
import { ChatController } from '../../../cli/tui/chat-controller.js'
import { settled } from '../../../cli/tui/chat-state.js'
import { ChatDetail, type ChatMessage } from '../../../shared/schemas/chats.js'
import { readFixtures } from '../../helpers/chat-recorder.js'
import { waitFor } from '../../helpers/wait.js'

// The chat screen's data side without ink: the events a test hands in (a queue it pushes to, as the
// daemon's stream would), merged into what the screen holds and prints once.

const fixtures = readFixtures()
const fixture = (name: string) => ChatDetail.parse(structuredClone(fixtures[name]))

/** Streams the test feeds: each open() takes the next, and records its Last-Event-ID. */
function streams() {
  const opened: (string | undefined)[] = []
  let push: (event: ChatEvent | Error | null) => void = () => {}
  const open: OpenChatEvents = async (_id, lastEventId, signal) => {
    opened.push(lastEventId)
    const queue: (ChatEvent | Error | null)[] = []
    let wake = () => {}
    push = (event) => {
      queue.push(event)
      wake()
    }
    return (async function* () {
      for (;;) {
        while (queue.length === 0) {
          await new Promise<void>((r) => {
            wake = r
            signal.addEventListener('abort', () => r(), { once: true })
          })
          if (signal.aborted) return
        }
        const next = queue.shift()!
        if (next === null) return
        if (next instanceof Error) throw next
        yield next
      }
    })()
  }
  return { open, opened, push: (e: ChatEvent | Error | null) => push(e) }
}

function client(detail: ChatDetail) {
  return {
    get: vi.fn(async (path: string, query?: Record<string, unknown>): Promise<any> => {
      if (path === '/members') return []
      if (query?.limit === 1) return { ...detail, messages: detail.messages.slice(-1) }
      return detail
    }),
    post: vi.fn(),
  }
}

async function opened(detail: ChatDetail) {
  const s = streams()
  const api = client(detail)
  const controller = new ChatController(api, { events: s.open, retryMs: 20 })
  await controller.openChat(detail.id)
  await waitFor(() => expect(s.opened).toHaveLength(1))
  return { controller, api, ...s, state: () => controller.getState() }
}

const logged = (state: ReturnType<ChatController['getState']>) =>
  state.log.flatMap((item) => (item.kind === 'message' ? [item.message.id] : []))

describe('the chat controller', () => {
  it('prints settled messages once, in order; one still changing holds back those after it', async () => {
    const waiting = fixture('tool-call-waiting')
    const done = fixture('tool-call-done')
    const { state, push, controller } = await opened(waiting)
    const [asked, said, call] = waiting.messages
    expect(logged(state())).toEqual([asked!.id, said!.id])
    expect(
      state()
        .messages.slice(state().logged)
        .map((m) => m.id),
    ).toEqual([call!.id])
    const allowed: ChatMessage = { ...call!, toolCall: { ...call!.toolCall!, status: 'allowed' } }
    push({ type: 'message.updated', message: allowed })
    const reply = done.messages.at(-1)!
    push({ type: 'message', message: reply })
    await waitFor(() => expect(state().messages).toHaveLength(4))
    // The reply is after a call still running: not printed before it.
    expect(logged(state())).toEqual([asked!.id, said!.id])
    push({ type: 'message.updated', message: done.messages[2]! })
    await waitFor(() => expect(logged(state())).toEqual(done.messages.map((m) => m.id)))
    const printed = state().log.find((i) => i.kind === 'message' && i.message.id === call!.id)
    expect(printed?.kind === 'message' && printed.message.toolCall!.status).toBe('done')
    controller.stop()
  })

  it('joins deltas into the reply being written, which its stored message replaces', async () => {
    const { state, push, controller } = await opened(fixture('reply'))
    push({ type: 'delta', delta: { messageId: 'r1', text: 'Hel' } })
    push({ type: 'delta', delta: { messageId: 'r1', text: 'lo' } })
    await waitFor(() => expect(state().drafts).toEqual([{ messageId: 'r1', text: 'Hello' }]))
    const message = { ...fixture('reply').messages.at(-1)!, id: 'r1', content: 'Hello' }
    push({ type: 'message', message })
    push({ type: 'delta', delta: { messageId: 'r1', text: ' late' } })
    await waitFor(() => expect(state().log.at(-1)).toMatchObject({ key: 'r1' }))
    expect(state().drafts).toEqual([])
    controller.stop()
  })

  it('reconnects from the newest message after a dropped stream, and stops on chat_not_found', async () => {
    const detail = fixture('reply')
    const { opened: ids, push, state, controller } = await opened(detail)
    push(new Error('socket hang up'))
    await waitFor(() => expect(ids).toHaveLength(2))
    expect(ids).toEqual([detail.messages.at(-1)!.id, detail.messages.at(-1)!.id])
    push(apiError(404, { error: 'chat_not_found', message: 'No chat.' }))
    await waitFor(() => expect(state().error).toBe('chat_not_found: No chat.'))
    await new Promise((r) => setTimeout(r, 100))
    expect(ids).toHaveLength(2)
    controller.stop()
  })

  it('marks what came by the stream read when the chat is left', async () => {
    const detail = fixture('reply')
    const { api, push, controller, state } = await opened(detail)
    const reply = { ...detail.messages.at(-1)!, id: 'new-reply' }
    push({ type: 'message', message: reply })
    await waitFor(() => expect(state().messages).toHaveLength(3))
    await controller.stop()
    expect(api.get).toHaveBeenLastCalledWith(`/chats/${detail.id}`, { limit: 1 })
  })

  it('keeps a queued message osd refuses with chat_replying, and sends it once the reply has ended (issue 51)', async () => {
    const detail = fixture('reply')
    const { api, push, controller, state } = await opened(detail)
    push({ type: 'chat', chat: { status: 'open', replying: true } })
    await waitFor(() => expect(state().chat?.replying).toBe(true))
    expect(await controller.send('next one')).toBe(true)
    expect(state().queued).toEqual(['next one'])
    expect(api.post).not.toHaveBeenCalled()
    // The stream says the reply ended, but osd already replies again (to a message sent elsewhere):
    // refused, the message stays first in the queue; the chat read again later says it is free.
    api.post.mockRejectedValueOnce(
      apiError(409, { error: 'chat_replying', message: 'The member is still replying.' }),
    )
    const sent = { ...detail.messages[0]!, id: 'sent-1', content: 'next one' }
    api.post.mockResolvedValueOnce(sent)
    push({ type: 'chat', chat: { status: 'open', replying: false } })
    await waitFor(() => expect(api.post).toHaveBeenCalledTimes(2))
    expect(api.post.mock.calls.map((c) => c[1])).toEqual([
      { content: 'next one' },
      { content: 'next one' },
    ])
    await waitFor(() => expect(state().queued).toEqual([]))
    expect(state().messages.at(-1)!.id).toBe('sent-1')
    expect(state().notice).toBeNull()
    controller.stop()
  })

  it('holds a message sent while the stream opens until it is open: the reply is followed from its start', async () => {
    const detail = fixture('reply')
    const s = streams()
    let answer!: () => void
    const answered = new Promise<void>((r) => (answer = r))
    // osd answers the stream late (a loaded machine): the message waits for it.
    const events: OpenChatEvents = async (...args) => {
      await answered
      return s.open(...args)
    }
    const api = client(detail)
    const sent = { ...detail.messages[0]!, id: 'sent-early', content: 'hello' }
    api.post.mockResolvedValueOnce(sent)
    const controller = new ChatController(api, { events, retryMs: 20 })
    await controller.openChat(detail.id)
    expect(controller.getState().link).toBe('connecting')
    expect(await controller.send('hello')).toBe(true)
    expect(controller.getState().queued).toEqual(['hello'])
    await new Promise((r) => setTimeout(r, 50))
    expect(api.post).not.toHaveBeenCalled()
    answer()
    await waitFor(() => expect(api.post).toHaveBeenCalledTimes(1))
    expect(api.post.mock.calls[0]![1]).toEqual({ content: 'hello' })
    await waitFor(() => expect(controller.getState().queued).toEqual([]))
    expect(controller.getState().link).toBe('live')
    controller.stop()
  })

  it('takes everything of a closed chat as settled, and drops a reply that was never stored', async () => {
    const waiting = fixture('question-waiting')
    expect(settled(waiting.messages[1]!, waiting)).toBe(false)
    expect(settled(waiting.messages[1]!, { status: 'closed' })).toBe(true)
    const { push, state, controller } = await opened(waiting)
    push({ type: 'delta', delta: { messageId: 'r2', text: 'Half a' } })
    await waitFor(() => expect(state().drafts).toHaveLength(1))
    waiting.status = 'closed' // what the daemon then reads, as the event says
    push({ type: 'chat', chat: { status: 'closed', replying: false } })
    await waitFor(() => expect(state().chat?.status).toBe('closed'))
    expect(state().drafts).toEqual([])
    expect(logged(state())).toEqual(waiting.messages.map((m) => m.id))
    controller.stop()
  })
})

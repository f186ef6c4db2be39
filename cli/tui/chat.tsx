import { render, useApp, useInput } from 'ink'
import { useEffect, useRef, useState, useSyncExternalStore, type ReactNode } from 'react'
import { useTerminalSize } from './terminal-size.js'
import {
  ChatController,
  type ChatControllerOptions,
  type ChatScreenClient,
} from './chat-controller.js'
import { onKey, sent, startMode, type Mode } from './chat-keys.js'
import { ChatScreen, Summary } from './chat-view.js'
import { splitKeys } from './gate-keys.js'
import { chatInstead, requireTerminal } from './terminal.js'

// `osctl chat` (DESIGN 9, 11): a conversation with a member, its replies as they come, tool calls and
// questions decided in place. The controller reads and sends; the view draws; this file wires keys and
// size to them.

export interface ChatProps {
  controller: ChatController
  now?: () => number
}

export function ChatApp({ controller, now = Date.now }: ChatProps): ReactNode {
  const state = useSyncExternalStore(controller.subscribe, controller.getState)
  const [mode, setMode] = useState<Mode>(startMode)
  const modeRef = useRef<Mode>(startMode)
  const [quitting, setQuitting] = useState(false)
  const { exit } = useApp()
  const { width, height } = useTerminalSize()
  const setBoth = (next: Mode) => {
    modeRef.current = next
    setMode(next)
  }

  useInput(
    (input, key) => {
      for (const [char, pressed] of splitKeys(input, key)) {
        const result = onKey(modeRef.current, char, pressed, controller.getState())
        setBoth(result.mode)
        const action = result.action
        if (!action) continue
        if (action.type === 'quit') return setQuitting(true)
        if (action.type === 'pick') void controller.pick(action.entry)
        else if (action.type === 'picker') {
          setBoth(startMode)
          void controller.showPicker()
        } else if (action.type === 'newTask') {
          setBoth(startMode)
          void controller.newCreateTask()
        } else if (action.type === 'decide') void controller.decide(action.message, action.decision)
        else if (action.type === 'answer') {
          void controller.answer(action.message, action.body).then((ok) => {
            if (ok) setBoth({ ...modeRef.current, answer: null })
          })
        } else if (action.type === 'send') {
          const text = action.text
          void controller.send(text).then((ok) => {
            if (ok) setBoth(sent(modeRef.current, text))
          })
        }
      }
    },
    { isActive: !quitting },
  )

  useEffect(() => {
    if (quitting) exit()
  }, [quitting, exit])

  const memberName = controller.memberName(state.chat?.memberId)
  if (quitting) return <Summary state={state} />
  return (
    <ChatScreen
      state={state}
      mode={mode}
      memberName={memberName}
      now={now()}
      width={width}
      height={height}
    />
  )
}

export interface ChatOptions extends ChatControllerOptions {
  stdin?: NodeJS.ReadStream
  stdout?: NodeJS.WriteStream
}

/**
 * Runs the chat screen until the person quits (Ctrl+D, q in the picker, or Ctrl+C). Refuses, with a
 * usage error that names the non-interactive verbs, unless stdin and stdout are terminals.
 */
export async function renderChat(
  client: ChatScreenClient,
  options: ChatOptions = {},
): Promise<void> {
  const stdin = options.stdin ?? process.stdin
  const stdout = options.stdout ?? process.stdout
  requireTerminal('chat', chatInstead, { stdin, stdout })
  const controller = new ChatController(client, options)
  const app = render(<ChatApp controller={controller} />, { stdin, stdout, patchConsole: false })
  void controller.start()
  try {
    await app.waitUntilExit()
  } finally {
    controller.stop()
  }
}

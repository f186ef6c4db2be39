import { render, useApp, useStdin, useStdout } from 'ink'
import { useEffect, useRef, useState, useSyncExternalStore, type ReactNode } from 'react'
import type { ChatClient } from '../chat.js'
import { chatEventSource, type StreamClient } from './chat-events.js'
import { ChatController, type ChatControllerOptions } from './chat-controller.js'
import { onKey, startMode, type Action, type Mode } from './chat-keys.js'
import { ChatScreen, Summary } from './chat-view.js'
import { afterSend, emptyEditor, withText } from './editor.js'
import { editExternally, type EditorRun } from './external-editor.js'
import { bracketedPasteOff, bracketedPasteOn, KeyReader, type KeyPress } from './keys.js'
import { useTerminalSize } from './terminal-size.js'
import { chatInstead, requireTerminal } from './terminal.js'

// `osctl chat` (DESIGN 9, 11, 13): a conversation with a member, its replies as they are written,
// tool calls and questions decided in place. The controller reads, follows and sends; the view
// draws; this file wires the keys (read from ink's raw inputs: keys.ts), the size and $EDITOR to them.

export interface ChatProps {
  controller: ChatController
  now?: () => number
  /** Runs $EDITOR on the draft (Ctrl+G); the screen waits until it returns. */
  editDraft?: (text: string) => EditorRun
  /** How long a resize must have settled before the screen is drawn again whole (100 ms unless told). */
  redrawMs?: number
}

/**
 * The first input this soon after the screen takes the terminal is what was typed while osctl
 * started (KeyReader.readTypeahead): it is waiting already, and ink reads it at once.
 */
const typeaheadMs = 500

/** Erases the screen and the scrollback, cursor home (ansi-escapes' clearTerminal, not Windows'). */
export const clearTerminal = '\x1b[2J\x1b[3J\x1b[H'

/**
 * After a resize, the screen drawn again whole at the new size (issue 51). The terminal has rewrapped
 * (or cut) what was drawn at the old width, so ink's count of the rows to erase is wrong and would
 * leave pieces of the old prompt behind, and the settled lines stay at the old width. So, once the
 * size has settled (a drag sends many), the terminal is cleared, scrollback included, and the log is
 * printed again from its first line at the new width: each settled line once, none left at the old.
 */
function useRedrawOnResize(redrawMs: number): number {
  const { stdout } = useStdout()
  const [generation, setGeneration] = useState(0)
  useEffect(() => {
    let timer: NodeJS.Timeout | undefined
    const resized = () => {
      clearTimeout(timer)
      timer = setTimeout(() => {
        stdout.write(clearTerminal)
        setGeneration((g) => g + 1)
      }, redrawMs)
    }
    stdout.on('resize', resized)
    return () => {
      clearTimeout(timer)
      stdout.off('resize', resized)
    }
  }, [stdout, redrawMs])
  return generation
}

export function ChatApp({
  controller,
  now = Date.now,
  editDraft = editExternally,
  redrawMs = 100,
}: ChatProps): ReactNode {
  const state = useSyncExternalStore(controller.subscribe, controller.getState)
  const [mode, setMode] = useState<Mode>(startMode)
  // Keys that arrive before React draws again must see the mode the previous key left.
  const modeRef = useRef<Mode>(startMode)
  const [quitting, setQuitting] = useState(false)
  const { exit } = useApp()
  const { setRawMode, internal_eventEmitter: inputs } = useStdin()
  const { width, height } = useTerminalSize()
  const generation = useRedrawOnResize(redrawMs)
  const setBoth = (next: Mode) => {
    modeRef.current = next
    setMode(next)
  }

  const act = (action: Action) => {
    switch (action.type) {
      case 'quit':
        return setQuitting(true)
      case 'pick':
        return void controller.pick(action.entry)
      case 'picker':
        setBoth({ ...startMode })
        return void controller.showPicker()
      case 'newTask':
        setBoth({ ...startMode })
        return void controller.newCreateTask()
      case 'stop':
        return void controller.stopReply()
      case 'decide':
        return void controller.decide(action.message, action.decision)
      case 'answer':
        return void controller.answer(action.message, action.body).then((ok) => {
          const now = modeRef.current
          if (ok) setBoth({ ...now, answer: null })
          // Not answered: the answer typed comes back to the prompt.
          else if (!now.editor.text) setBoth({ ...now, editor: withText(emptyEditor, action.text) })
        })
      case 'send':
        return void controller.send(action.text).then((ok) => {
          if (ok)
            setBoth({ ...modeRef.current, editor: afterSend(modeRef.current.editor, action.text) })
        })
      case 'external': {
        const now = modeRef.current
        const run = editDraft(now.editor.text)
        if (run.text !== null)
          setBoth({ ...now, editor: withText(now.editor, run.text), hint: null })
        else setBoth({ ...now, hint: `The draft is kept: ${run.error ?? 'the editor failed'}` })
        return
      }
    }
  }
  // Keys typed while the view reads what it shows (osctl starting, a chat opening) wait for it, then
  // act as if typed after: a message typed ahead reaches the prompt, and is sent if entered. Ctrl+C
  // acts at once.
  const held = useRef<KeyPress[]>([])
  const press = useRef<(key: KeyPress) => void>(() => {})
  press.current = (key) => {
    const now = controller.getState()
    if (!now.loaded && !(key.ctrl && key.name === 'c')) {
      held.current.push(key)
      return
    }
    const result = onKey(modeRef.current, key, now)
    setBoth(result.mode)
    if (result.action) act(result.action)
  }
  useEffect(() => {
    if (!state.loaded) return
    for (const key of held.current.splice(0)) press.current(key)
  }, [state.loaded, state.view])

  useEffect(() => {
    if (quitting) return
    const reader = new KeyReader()
    const rawSince = performance.now()
    let first = true
    // ink's own inputs (its parser splits escape sequences from text), named here: keys.ts. The
    // first, when it comes at once with a line feed in it, was typed while osctl started.
    const onInput = (input: string) => {
      const typedAhead =
        first &&
        performance.now() - rawSince < typeaheadMs &&
        input.includes('\n') &&
        !input.includes('\r') &&
        !input.startsWith('\x1b')
      first = false
      for (const key of typedAhead ? reader.readTypeahead(input) : reader.read(input))
        press.current(key)
    }
    setRawMode(true)
    inputs.on('input', onInput)
    return () => {
      inputs.off('input', onInput)
      setRawMode(false)
    }
  }, [quitting, inputs, setRawMode])

  useEffect(() => {
    if (quitting) exit()
  }, [quitting, exit])

  const memberName = controller.memberName(state.chat?.memberId)
  if (quitting) return <Summary state={state} />
  return (
    <ChatScreen
      state={state}
      generation={generation}
      mode={mode}
      memberName={memberName}
      now={now()}
      width={width}
      height={height}
    />
  )
}

export interface ChatOptions extends Partial<ChatControllerOptions> {
  stdin?: NodeJS.ReadStream
  stdout?: NodeJS.WriteStream
}

/** What the screen needs of ApiClient. */
export type ChatScreenClient = ChatClient & StreamClient

/**
 * Runs the chat screen until the person quits (Ctrl+C on an empty prompt, Ctrl+D, q in the picker).
 * Refuses, with a usage error that names the non-interactive verbs, unless stdin and stdout are
 * terminals. Asks the terminal for bracketed pastes while it runs, so a paste is text, never keys.
 */
export async function renderChat(
  client: ChatScreenClient,
  options: ChatOptions = {},
): Promise<void> {
  const stdin = options.stdin ?? process.stdin
  const stdout = options.stdout ?? process.stdout
  requireTerminal('chat', chatInstead, { stdin, stdout })
  const controller = new ChatController(client, {
    ...options,
    events: options.events ?? chatEventSource(client),
  })
  // $EDITOR gets the terminal as a shell leaves it: cooked, without bracketed paste, cursor shown.
  const editDraft = (text: string): EditorRun => {
    stdout.write(bracketedPasteOff + '\x1b[?25h')
    stdin.setRawMode?.(false)
    try {
      return editExternally(text)
    } finally {
      stdin.setRawMode?.(true)
      stdout.write(bracketedPasteOn + '\x1b[?25l')
    }
  }
  const pasteOff = () => stdout.write(bracketedPasteOff)
  process.once('exit', pasteOff)
  stdout.write(bracketedPasteOn)
  const app = render(<ChatApp controller={controller} editDraft={editDraft} />, {
    stdin,
    stdout,
    patchConsole: false,
    // Ctrl+C is the screen's: it clears a draft, and quits only on an empty prompt.
    exitOnCtrlC: false,
  })
  void controller.start()
  try {
    await app.waitUntilExit()
  } finally {
    pasteOff()
    process.off('exit', pasteOff)
    await controller.stop()
  }
}

import { render, useApp, useInput } from 'ink'
import { useEffect, useRef, useState, useSyncExternalStore, type ReactNode } from 'react'
import { useTerminalSize } from './terminal-size.js'
import { GateReviewController, type GateFilters, type GateReviewClient } from './gate-controller.js'
import { browse, onKey, splitKeys, type Mode } from './gate-keys.js'
import { ReviewScreen, Summary } from './gate-view.js'
import { gateReviewInstead, requireTerminal } from './terminal.js'

// `osctl gates review` (DESIGN 9): the waiting gates, one selected and shown in full, decided with a
// key. The controller reads and decides; the view draws; this file wires keys and size to them.

export interface GateReviewProps {
  controller: GateReviewController
  /** The clock the ages are told by (tests fix it). */
  now?: () => number
}

/** The screen, wired: keys go through onKey, its actions to the controller. */
export function GateReview({ controller, now = Date.now }: GateReviewProps): ReactNode {
  const state = useSyncExternalStore(controller.subscribe, controller.getState)
  const [mode, setMode] = useState<Mode>(browse)
  // Keys that arrive before React draws again must see the mode the previous key left.
  const modeRef = useRef<Mode>(browse)
  const [quitting, setQuitting] = useState(false)
  const { exit } = useApp()
  const { width, height } = useTerminalSize()

  useInput(
    (input, key) => {
      for (const [char, pressed] of splitKeys(input, key)) {
        const result = onKey(
          modeRef.current,
          char,
          pressed,
          controller.selected(),
          controller.getState().sending,
        )
        modeRef.current = result.mode
        setMode(result.mode)
        const action = result.action
        if (action?.type === 'move') controller.move(action.delta)
        else if (action?.type === 'decide') void controller.decide(action.gate, action.body)
        else if (action?.type === 'quit') return setQuitting(true)
      }
    },
    { isActive: !quitting },
  )

  useEffect(() => {
    if (quitting) exit()
  }, [quitting, exit])

  if (quitting) return <Summary decided={state.decided} />
  return (
    <ReviewScreen
      state={state}
      mode={mode}
      now={now()}
      width={width}
      height={height}
      intervalMs={controller.intervalMs}
    />
  )
}

export interface GateReviewOptions {
  /** Only these gates (GET /v1/gates filters). */
  filters?: GateFilters
  /** How often the list is read again (default 3 s). */
  intervalMs?: number
  stdin?: NodeJS.ReadStream
  stdout?: NodeJS.WriteStream
}

/**
 * Runs the gate review screen until the person quits (q or Ctrl+C). Refuses, with a usage error that
 * names the non-interactive verbs, unless stdin and stdout are terminals.
 */
export async function renderGateReview(
  client: GateReviewClient,
  options: GateReviewOptions = {},
): Promise<void> {
  const stdin = options.stdin ?? process.stdin
  const stdout = options.stdout ?? process.stdout
  requireTerminal('gates review', gateReviewInstead, { stdin, stdout })
  const controller = new GateReviewController(client, {
    filters: options.filters,
    intervalMs: options.intervalMs,
  })
  // Nothing of osctl writes through console while the screen is up; leaving it alone keeps test
  // runners that replace console working.
  const app = render(<GateReview controller={controller} />, { stdin, stdout, patchConsole: false })
  controller.start()
  try {
    await app.waitUntilExit()
  } finally {
    controller.stop()
  }
}

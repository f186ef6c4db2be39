import { vi } from 'vitest'
/**
 * Polls `check` until it returns true, or fails after `timeoutMs`: for effects that travel by NOTIFY.
 * `what` names the condition in the failure; as a function it is read then, to say what was seen.
 */
export async function eventually(
  check: () => Promise<boolean> | boolean,
  timeoutMs = 3000,
  what: string | (() => string) = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) {
      const said = typeof what === 'function' ? what() : what
      throw new Error(`${said} did not hold within ${timeoutMs} ms`)
    }
    await new Promise((r) => setTimeout(r, 20))
  }
}

/**
 * vi.waitFor with room for a loaded machine: its default of 1 s failed the screens' tests in a full run
 * on two busy cores (a frame a second late is no fault of the screen).
 */
export function waitFor<T>(check: () => T | Promise<T>, timeoutMs = 10_000): Promise<T> {
  return vi.waitFor(check, { timeout: timeoutMs, interval: 20 })
}

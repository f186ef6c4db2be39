/** Polls `check` until it returns true, or fails after `timeoutMs`: for effects that travel by NOTIFY. */
export async function eventually(
  check: () => Promise<boolean> | boolean,
  timeoutMs = 3000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

/**
 * Waiting on a condition rather than for a fixed time: `cond` is checked
 * every few milliseconds until it holds, and the wait fails only after a
 * generous overall limit, so a loaded machine makes the test slower, not red.
 */
export async function waitFor(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000, everyMs = 10): Promise<void> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    if (await cond()) return
    if (performance.now() > deadline) throw new Error(`${what}: not seen within ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

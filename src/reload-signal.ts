/**
 * SIGHUP is a reload request, from the first moment the process can have a
 * handler: Node's default for SIGHUP ends the process (exit 129), and a
 * config-reloader sidecar may send it while the gateway is still starting.
 * The serve command holds the signal before it loads anything heavy (cli.ts
 * imports this module first and loads the gateway afterwards); a signal that
 * comes before the gateway can reload is kept, and the gateway reloads once
 * when it subscribes (several signals meanwhile make one reload).
 *
 * No imports on purpose: this module must be cheap to load.
 */
const handlers = new Set<() => void>()
let held = false
let pending = false

function onSignal(): void {
  if (handlers.size === 0) pending = true
  for (const fn of handlers) fn()
}

/** From now on SIGHUP never ends the process: it reloads, now or once the gateway subscribes. */
export function holdReloadSignal(): void {
  if (held) return
  held = true
  process.on('SIGHUP', onSignal)
}

/**
 * Call `fn` on every SIGHUP from now on, and at once when one came since the
 * signal was held. Returns the unsubscribe (the signal stays held: a SIGHUP
 * while draining is ignored, not a death).
 */
export function onReloadSignal(fn: () => void): () => void {
  holdReloadSignal()
  handlers.add(fn)
  if (pending) {
    pending = false
    fn()
  }
  return () => void handlers.delete(fn)
}

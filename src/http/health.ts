/**
 * /livez and /readyz (docs/behaviour.md §1). Readiness is a loaded bundle, the
 * same in every worker thread, plus a usable store.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { FailPolicy, Store, StoreState } from '../store/store.js'
import { sendJson } from './respond.js'

export interface Readiness {
  /** null while no bundle is loaded. */
  bundle(): { version: number; hash: string; loadedAt: number } | null
  /** Store state for operators (`ok`, `degraded`, …); `ready: false` fails /readyz. */
  store(): { state: string; ready: boolean }
  /** With worker threads: every worker runs the supervisor's bundle (false for the moment a reload reaches them all). */
  bundleInSync?(): boolean
}

/**
 * Whether the store lets the gateway serve: with fail-open a store that is
 * down still serves (requests pass, counted), so the instance stays ready;
 * with fail-closed it must be connected.
 */
export function storeReady(state: StoreState, failPolicy: FailPolicy): boolean {
  return failPolicy === 'open' || state !== 'connecting'
}

/**
 * The store's state and whether /readyz reports it ready. Under fail-open a
 * store that is not connected reads `degraded`, not `connecting`: the
 * instance serves, but without limits, which an operator must not mistake
 * for a normal start.
 */
export function storeHealth(store: Store, failPolicy: FailPolicy): { state: StoreState; ready: boolean } {
  const state = store.state()
  return { state: failPolicy === 'open' && state === 'connecting' ? 'degraded' : state, ready: storeReady(state, failPolicy) }
}

export function livez(_req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(200, ['content-type', 'text/plain', 'content-length', '2', 'cache-control', 'no-store'])
  res.end('ok')
}

export function readyz(readiness: Readiness) {
  return (_req: IncomingMessage, res: ServerResponse): void => {
    const b = readiness.bundle()
    const store = readiness.store()
    if (!b) return sendJson(res, 503, { status: 'not_ready', reason: 'no_policy_loaded', store: store.state })
    // One answer for the process: never a version some worker does not run.
    if (readiness.bundleInSync?.() === false)
      return sendJson(res, 503, { status: 'not_ready', reason: 'bundle_reloading', store: store.state })
    if (!store.ready) return sendJson(res, 503, { status: 'not_ready', reason: 'store_unavailable', store: store.state })
    sendJson(res, 200, {
      status: 'ready',
      policy_version: b.version,
      policy_hash: b.hash,
      last_config_update: b.loadedAt,
      store: store.state,
    })
  }
}

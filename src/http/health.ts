/** /livez and /readyz (SPEC §1). Readiness is a loaded bundle plus a usable store. */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { sendJson } from './proxy.js'

export interface Readiness {
  /** null while no bundle is loaded. */
  bundle(): { version: number; hash: string; loadedAt: number } | null
  /** Store state for operators (`ok`, `degraded`, …); `ready: false` fails /readyz. */
  store(): { state: string; ready: boolean }
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

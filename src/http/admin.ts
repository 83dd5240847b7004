/** The admin routes: /livez, /readyz and /metrics (docs/behaviour.md §1), on the main listener or on FAIRVISOR_ADMIN_PORT's. */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Metrics } from '../observe/metrics.js'
import type { FailPolicy, Store } from '../store/store.js'
import { livez, readyz, storeReady, type Readiness } from './health.js'
import { sendJson } from './respond.js'
import type { Handler } from './server.js'

export function adminRoutes(bundle: Readiness['bundle'], store: Store, failPolicy: FailPolicy, metrics: Metrics): Map<string, Handler> {
  const state = (): { state: string; ready: boolean } => {
    const s = store.state()
    return { state: s, ready: storeReady(s, failPolicy) }
  }
  return new Map<string, Handler>([
    ['/livez', livez],
    ['/readyz', readyz({ bundle, store: state })],
    ['/metrics', (_req: IncomingMessage, res: ServerResponse) => {
      metrics.registry.metrics().then((text) => {
        res.writeHead(200, ['content-type', metrics.registry.contentType, 'cache-control', 'no-store'])
        res.end(text)
      }, (err: Error) => sendJson(res, 500, { error: err.message }))
    }],
  ])
}

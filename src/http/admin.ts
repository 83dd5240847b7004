/** The admin routes: /livez, /readyz and /metrics (docs/behaviour.md §1), on the main listener or on FAIRVISOR_ADMIN_PORT's. */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Metrics } from '../observe/metrics.js'
import type { FailPolicy, Store } from '../store/store.js'
import { livez, readyz, storeHealth, type Readiness } from './health.js'
import { sendJson } from './respond.js'
import type { Handler } from './server.js'

/**
 * `metricsText`: where /metrics comes from (default: this thread's registry; worker threads ask their supervisor for the sum).
 * `bundleInSync`: with worker threads, whether every worker runs the supervisor's bundle.
 */
export function adminRoutes(
  bundle: Readiness['bundle'],
  store: Store,
  failPolicy: FailPolicy,
  metrics: Metrics,
  metricsText = (): Promise<string> => metrics.registry.metrics(),
  bundleInSync?: Readiness['bundleInSync'],
): Map<string, Handler> {
  return new Map<string, Handler>([
    ['/livez', livez],
    ['/readyz', readyz({ bundle, store: () => storeHealth(store, failPolicy), bundleInSync })],
    [
      '/metrics',
      (_req: IncomingMessage, res: ServerResponse) => {
        metricsText().then(
          (text) => {
            res.writeHead(200, ['content-type', metrics.registry.contentType, 'cache-control', 'no-store'])
            res.end(text)
          },
          (err: Error) => sendJson(res, 500, { error: err.message }),
        )
      },
    ],
  ])
}

/**
 * The admin routes: /livez, /readyz and /metrics (docs/behaviour.md §1), on the main listener or on
 * FAIRVISOR_ADMIN_PORT's; and what only the admin listener serves (adminListener): the admin API
 * under /v1/admin/ (src/admin/api.ts, docs/admin.md) and the status page at `/`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Metrics } from '../observe/metrics.js'
import type { FailPolicy, Store } from '../store/store.js'
import { livez, readyz, storeHealth, type Readiness } from './health.js'
import { sendJson } from './respond.js'
import { notFound } from './routes.js'
import { pathOf, type Handler } from './server.js'

/** Every admin API path starts with this. */
export const ADMIN_PREFIX = '/v1/admin/'

// GET /: the status page
import { statusPage as statusPageRoute } from '../admin/status-page.js'

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

/**
 * The admin listener's routes: the health routes, the status page at `/`, and every path under
 * ADMIN_PREFIX to `api` (the admin API, or its answer that it is off). Never on the main listener,
 * where `/` and /v1/admin/ are traffic.
 */
export function adminListener(health: ReadonlyMap<string, Handler>, api: Handler): { routes: Map<string, Handler>; fallback: Handler } {
  return {
    routes: new Map([...health, ['/', statusPageRoute]]),
    fallback: (req, res) => (pathOf(req.url ?? '/').startsWith(ADMIN_PREFIX) ? api(req, res) : notFound(req, res)),
  }
}

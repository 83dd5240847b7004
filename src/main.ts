/**
 * Wiring: settings → observe → store → bundle source → engine → listeners.
 * The only module that names concrete implementations and reads the clock.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { BundleSource, type ReloadReport } from './bundle/source.js'
import { watchBundle } from './bundle/watch.js'
import { Engine, type Decision, type EngineObserver } from './engine/evaluate.js'
import { createDebugSessions, debugHeaders } from './http/debug-session.js'
import { decisionHandler } from './http/decision-api.js'
import { livez, readyz } from './http/health.js'
import { createProxy, sendJson, type Proxy } from './http/proxy.js'
import { allowHeaders, inputFromRequest, sendRejection } from './http/respond.js'
import { createListener, type Handler, type Listener } from './http/server.js'
import { createLogger, type Logger } from './observe/logger.js'
import { createMetrics, retryAfterBucket, type Metrics } from './observe/metrics.js'
import { makeTrustCheck } from './request/client-ip.js'
import { NetworkData } from './request/network-data.js'
import { bearerToken, createJwtVerifier } from './request/jwt-verify.js'
import { rawHeader, RequestView, type RequestInput } from './request/view.js'
import type { Settings } from './settings.js'
import { MemoryStore } from './store/memory.js'
import { RedisStore } from './store/redis.js'
import { RedisClusterStore } from './store/redis-cluster.js'
import { parseRedisUrl } from './store/redis-url.js'
import type { Store } from './store/store.js'
import { nowOrLater } from './now-or-later.js'
import { VERSION } from './version.js'

export const clock = (): number => Date.now()

export interface Gateway {
  address: AddressInfo
  adminAddress: AddressInfo | undefined
  bundles: BundleSource
  metrics: Metrics
  log: Logger
  /** Evaluate one request description (shared by the proxy and the decision API). */
  decide(input: RequestInput, collectDescriptors?: boolean): Decision | Promise<Decision>
  shutdown(): Promise<void>
}

function createStore(settings: Readonly<Settings>, log: Logger): Store {
  if (settings.store === 'memory') return new MemoryStore({ maxBytes: settings.sharedDictBytes })
  const target = parseRedisUrl(settings.store)
  const opts = { target, timeoutMs: settings.redisTimeoutMs, failPolicy: settings.failPolicy, log: (level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string) => log[level](fields, msg) }
  return target.kind === 'cluster' ? new RedisClusterStore(opts) : new RedisStore(opts)
}

function observerFor(log: Logger, metrics: Metrics, store: Store, failPolicy: string): EngineObserver {
  let lastStoreErrorLog = 0
  let suppressed = 0
  return {
    descriptorMissing(key, policy, rule) {
      metrics.descriptorMissing.inc({ key })
      log.warn({ key, policy, rule }, 'limit key missing; rule skipped')
    },
    shadowReject(r) {
      metrics.shadowRejects.inc({ policy: r.policyId })
      log.info({ event: 'would_reject', policy: r.policyId, rule: r.ruleName, reason: r.reason, key: r.key }, 'shadow policy would reject')
    },
    storeError(err) {
      metrics.storeErrors.inc({ store: store.kind })
      // During an outage every request fails the same way: one line per second, with the count, not one per request.
      const now = clock()
      suppressed++
      if (now - lastStoreErrorLog < 1000) return
      log.error({ err: { message: err.message, code: (err as { code?: string }).code }, failures: suppressed, failPolicy }, 'store call failed')
      lastStoreErrorLog = now
      suppressed = 0
    },
    limitCharged(policy, cost, tokensLeft) {
      metrics.hot.tokensConsumed.inc(policy, () => ({ policy }), cost)
      metrics.hot.tokensRemaining.set(policy, () => ({ policy }), tokensLeft)
    },
  }
}

function recordDecision(metrics: Metrics, d: Decision, startNs: bigint): void {
  const action = d.allowed ? 'allow' : d.status === 429 ? 'reject' : 'error'
  const policy = d.policyId ?? ''
  metrics.hot.decisions.inc(`${action}|${d.reason}|${policy}`, () => ({ action, reason: d.reason, policy }))
  metrics.decisionDuration.observe(Number(process.hrtime.bigint() - startNs) / 1e9)
  const limit = d.limit
  if (limit) metrics.hot.ratelimitRemaining.set(limit.policyId, () => ({ policy: limit.policyId }), limit.remaining)
  if (d.retryAfterS !== undefined) {
    const bucket = retryAfterBucket(d.retryAfterS)
    metrics.hot.retryAfterBucket.inc(bucket, () => ({ bucket }))
  }
}

function logReload(log: Logger, metrics: Metrics, bundles: BundleSource, r: ReloadReport): void {
  metrics.reloads.inc({ result: r.result })
  for (const w of r.warnings) log.warn({ file: r.file }, w)
  if (r.result !== 'applied') {
    for (const e of r.errors) log.error({ file: r.file, result: r.result }, e)
    return
  }
  const b = bundles.current!
  metrics.configInfo.reset()
  metrics.configInfo.set({ version: String(b.version), hash: b.hash }, 1)
  log.info({ file: r.file, version: b.version, hash: b.hash, policies: b.policies.length }, 'bundle applied')
}

export async function startGateway(settings: Readonly<Settings>): Promise<Gateway> {
  const log = createLogger(settings.logLevel)
  const metrics = createMetrics()
  metrics.buildInfo.set({ version: VERSION }, 1)
  // Before any connection opens: a bad JWT key source stops start-up (exit 2).
  const jwt = createJwtVerifier(settings)
  const net = new NetworkData(settings)
  const store = createStore(settings, log)
  // Start with Redis connected when it is reachable; when it is not, start anyway (fail policy applies).
  if ((store instanceof RedisStore || store instanceof RedisClusterStore) && !(await store.waitReady(3000))) log.warn({ store: store.kind }, 'redis store not reachable at start-up; the fail policy applies until it is')
  const bundles = new BundleSource(settings.configFile, clock)
  bundles.onReload((r) => logReload(log, metrics, bundles, r))
  metrics.bindLiveState({ bundle: () => bundles.current, nowMs: clock })
  if (settings.configFile === undefined) log.warn('FAIRVISOR_CONFIG_FILE is not set: every request is answered 503 no_bundle_loaded')
  else bundles.reload()

  const engine = new Engine({ store, failPolicy: settings.failPolicy, observer: observerFor(log, metrics, store, settings.failPolicy) })
  const trusted = settings.trustedProxiesText ? settings.trustedProxies : undefined
  /**
   * The decision for a request: `then` runs with it, at once or when the store
   * (or the JWKS) answers. A callback rather than a promise because the proxy's
   * hot path saves a promise hop per request with Redis; metrics are recorded
   * in the same step.
   */
  const evaluate = (input: RequestInput, collectDescriptors: boolean, start: bigint, then: (d: Decision) => void): void => {
    engine.evaluateThen(bundles.current, new RequestView(input, trusted, net), clock(), collectDescriptors, (d) => {
      recordDecision(metrics, d, start)
      then(d)
    })
  }
  const decideThen = (input: RequestInput, collectDescriptors: boolean, then: (d: Decision) => void): void => {
    const start = process.hrtime.bigint()
    const token = jwt && bearerToken(rawHeader(input.rawHeaders, 'authorization'))
    if (token) jwt!.verify(token, clock()).then((verifiedClaims) => evaluate({ ...input, verifiedClaims }, collectDescriptors, start, then))
    else evaluate(input, collectDescriptors, start, then)
  }
  /** decideThen as a value: the decision itself when it is known at once, else a promise of it. */
  const decide = (input: RequestInput, collectDescriptors = false): Decision | Promise<Decision> =>
    nowOrLater((then: (d: Decision) => void) => decideThen(input, collectDescriptors, then))

  let proxy: Proxy | undefined
  const routes = new Map<string, Handler>()
  const admin = new Map<string, Handler>([
    ['/livez', livez],
    ['/readyz', readyz({ bundle: () => bundles.current, store: () => store.health() })],
    ['/metrics', (_req: IncomingMessage, res: ServerResponse) => {
      metrics.registry.metrics().then((text) => {
        res.writeHead(200, ['content-type', metrics.registry.contentType, 'cache-control', 'no-store'])
        res.end(text)
      }, (err: Error) => sendJson(res, 500, { error: err.message }))
    }],
  ])
  const separateAdmin = settings.mode === 'reverse_proxy' && settings.adminPort !== undefined
  // Debug sessions live on the main listener in both modes: the cookie belongs to the clients' host.
  const debug = createDebugSessions(settings.debugSessionSecret, clock)
  for (const [k, v] of debug.routes) routes.set(k, v)
  if (!separateAdmin) for (const [k, v] of admin) routes.set(k, v)

  let fallback: Handler
  if (settings.mode === 'reverse_proxy') {
    const p = createProxy({ settings, log, isTrustedPeer: makeTrustCheck(settings.trustedProxies) })
    proxy = p
    const onDecision = (req: IncomingMessage, res: ServerResponse, d: Decision): void => {
      if (d.allowed) p.forward(req, res, allowHeaders(d))
      else sendRejection(res, d, settings.exposeReason)
    }
    const onDebugDecision = (req: IncomingMessage, res: ServerResponse, d: Decision, startNs: bigint): void => {
      const extra = debugHeaders(d, Number((process.hrtime.bigint() - startNs) / 1000n), d.allowed || !settings.exposeReason)
      if (d.allowed) p.forward(req, res, [...(allowHeaders(d) ?? []), ...extra])
      else sendRejection(res, d, settings.exposeReason, extra)
    }
    fallback = (req, res) => {
      if (debug.active(req)) {
        const start = process.hrtime.bigint()
        const d = decide(inputFromRequest(req), true)
        if (d instanceof Promise) d.then((x) => onDebugDecision(req, res, x, start))
        else onDebugDecision(req, res, d, start)
        return
      }
      decideThen(inputFromRequest(req), false, (d) => onDecision(req, res, d))
    }
  } else {
    routes.set('/v1/decision', decisionHandler({ decide, exposeReason: settings.exposeReason, debug }))
    fallback = (_req, res) => sendJson(res, 404, { error: 'not_found' })
  }

  const listener: Listener = createListener({
    settings,
    log,
    routes,
    fallback,
    upgrade: proxy
      ? (req, socket, head) => {
          const d = decide(inputFromRequest(req))
          const go = (x: Decision): void => {
            if (x.allowed) proxy!.upgrade(req, socket, head)
            else socket.end(`HTTP/1.1 ${x.status} ${x.status === 429 ? 'Too Many Requests' : 'Service Unavailable'}\r\nconnection: close\r\ncontent-length: 0\r\n${x.retryAfterS ? `retry-after: ${x.retryAfterS}\r\n` : ''}\r\n`)
          }
          if (d instanceof Promise) d.then(go)
          else go(d)
        }
      : undefined,
  })
  const address = await listener.listen(settings.port, settings.host)
  let adminListener: Listener | undefined
  let adminAddress: AddressInfo | undefined
  if (separateAdmin) {
    adminListener = createListener({ settings, log, routes: admin, fallback: (_req, res) => sendJson(res, 404, { error: 'not_found' }) })
    adminAddress = await adminListener.listen(settings.adminPort!, settings.host)
  }

  const sweeper = store instanceof MemoryStore ? setInterval(() => store.sweep(clock() / 1000), 1000) : undefined
  sweeper?.unref()
  const onHup = (): void => void bundles.reload()
  process.on('SIGHUP', onHup)
  // Hot reload on every way the file can be replaced (see bundle/watch.ts); SIGHUP forces a reload.
  const watcher = watchBundle(bundles, { onError: (err) => log.error({ err: { message: err.message }, file: settings.configFile }, 'bundle watcher failed; the loaded bundle stays') })
  await watcher.ready
  await net.watch(log)

  log.info(
    { mode: settings.mode, host: address.address, port: address.port, adminPort: adminAddress?.port, backend: settings.backendUrl?.origin, store: store.kind, version: VERSION },
    `fairvisor listening on ${address.address}:${address.port}`,
  )

  let closing: Promise<void> | undefined
  const shutdown = (): Promise<void> =>
    (closing ??= (async () => {
      log.info({ timeoutMs: settings.shutdownTimeoutMs }, 'shutting down: draining in-flight requests')
      process.off('SIGHUP', onHup)
      await watcher.close()
      await net.close()
      if (sweeper) clearInterval(sweeper)
      await Promise.all([listener.shutdown(settings.shutdownTimeoutMs), adminListener?.shutdown(settings.shutdownTimeoutMs)])
      await Promise.allSettled([proxy?.close(), store.close()])
      log.info('shutdown complete')
    })())

  return { address, adminAddress, bundles, metrics, log, decide, shutdown }
}

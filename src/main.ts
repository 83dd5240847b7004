/** Wiring: settings → observe → store → bundle source → engine → listeners. The only module that names concrete implementations and reads the clock. */
import type { AddressInfo } from 'node:net'
import { binder, closeServer } from './bind-listeners.js'
import { BundleSource } from './bundle/source.js'
import { watchBundle } from './bundle/watch.js'
import { Engine } from './engine/evaluate.js'
import { SettingError } from './errors.js'
import { adminRoutes } from './http/admin.js'
import { createDecider, type Decide } from './http/decide.js'
import { createDebugSessions } from './http/debug-session.js'
import { createProxy } from './http/proxy.js'
import { createRoutes, notFound } from './http/routes.js'
import { createListener } from './http/server.js'
import { ByteBudget } from './grpc/byte-budget.js'
import { createGrpcMetrics } from './grpc/metrics.js'
import { RlsSource } from './grpc/rls-source.js'
import { startGrpc } from './grpc/server.js'
import { decisionRecorder, engineObserver, leaseTableFullLog, storeFullLog } from './observe/engine-observer.js'
import { LlmExchange } from './llm/exchange.js'
import { llmHooks } from './observe/llm-observer.js'
import { createLogger, type Logger } from './observe/logger.js'
import { createMetrics, type Metrics } from './observe/metrics.js'
import { logReload } from './observe/reload-log.js'
import { makeTrustCheck } from './request/client-ip.js'
import { createJwtVerifier } from './request/jwt-verify.js'
import { NetworkData } from './request/network-data.js'
import type { Settings } from './settings.js'
import { createStore } from './store/factory.js'
import type { Store } from './store/store.js'
import { threadId } from 'node:worker_threads'
import { listenOnFd, sharedListeners, type ThreadContext } from './workers/context.js'
import { VERSION } from './version.js'

export const clock = (): number => Date.now()
export interface Gateway {
  address: AddressInfo
  adminAddress: AddressInfo | undefined
  bundles: BundleSource
  metrics: Metrics
  log: Logger
  decide: Decide
  shutdown(): Promise<void>
}

/** The store the settings name; worker threads share one table (store/shared/), one thread keeps the in-process store of its own. */
function openStore(s: Readonly<Settings>, log: Logger, thread: ThreadContext | undefined): Store {
  const storeLog = (level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string): void => log[level](fields, msg)
  const shared = thread ? { table: thread.table, leases: thread.leases, threadId } : undefined
  return createStore(s.storeConfig, {
    clock,
    log: storeLog,
    onFull: storeFullLog(log, clock),
    onLeaseTableFull: leaseTableFullLog(log, clock),
    shared,
  })
}

/** `thread`: this gateway is one worker thread of several (workers/): the supervisor owns the socket, reloads and /metrics. */
export async function startGateway(settings: Readonly<Settings>, thread?: ThreadContext): Promise<Gateway> {
  const log = thread ? createLogger(settings.logLevel).child({ worker: thread.workerId }) : createLogger(settings.logLevel)
  const metrics = createMetrics()
  metrics.buildInfo.set({ version: VERSION }, 1)
  // Before any connection opens: a bad JWT key source or data file stops start-up (exit 2).
  const jwt = createJwtVerifier(settings)
  const net = new NetworkData(settings, thread?.net)
  const store = openStore(settings, log, thread)
  // Start with the store connected when it is reachable; when it is not, start anyway (fail policy applies).
  // A store that refuses the URL (password, role, database) is a wrong setting: waiting would not fix it (exit 2).
  const reachable = await store.ready(3000).catch(async (err: Error) => {
    await store.close()
    throw new SettingError('FAIRVISOR_STORE', `the ${store.kind} store refused the connection: ${err.message}`)
  })
  if (!reachable) log.warn({ store: store.kind }, 'store not reachable at start-up; the fail policy applies until it is')
  const bundles = new BundleSource(settings.configFile, clock, { signingKey: settings.bundleSigningKey })
  if (!thread) bundles.onReload((r) => logReload(log, metrics, r, r.result === 'applied' ? bundles.current : null))
  metrics.bindLiveState({
    bundle: () => bundles.current,
    nowMs: clock,
    storeFill: () => store.fill?.(),
    leaseTableFull: () => store.leaseTableFull?.(),
  })
  if (settings.configFile === undefined) log.warn('FAIRVISOR_CONFIG_FILE is not set: every request is answered 503 no_bundle_loaded')
  else bundles.reload()
  const engine = new Engine({
    store,
    failPolicy: settings.failPolicy,
    observer: engineObserver(log, metrics, store.kind, settings.failPolicy, clock),
  })
  const trusted = settings.trustedProxiesText ? settings.trustedProxies : undefined
  const decide = createDecider({ engine, bundle: () => bundles.current, jwt, trusted, net, clock, decided: decisionRecorder(metrics, log) })
  const proxy =
    settings.mode === 'reverse_proxy' ? createProxy({ settings, log, isTrustedPeer: makeTrustCheck(settings.trustedProxies) }) : undefined
  const admin = adminRoutes(() => bundles.current, store, settings.failPolicy, metrics, thread?.metricsText)
  const separateAdmin = settings.adminPort !== undefined // in both modes
  const debug = createDebugSessions(settings.debugSessionSecret, clock)
  const hooks = llmHooks(log, metrics, store, clock) // LLM settlement: usage read from responses, one store adjust each
  const llm = {
    bundle: () => bundles.current,
    exchange: (r: ConstructorParameters<typeof LlmExchange>[0]) => new LlmExchange(r, hooks, settings.llmMaxEventBytes),
  }
  const main = createRoutes({
    decide,
    exposeReason: settings.exposeReason,
    debug,
    proxy,
    admin: separateAdmin ? new Map() : admin,
    paths: settings,
    llm,
  })
  // FAIRVISOR_GRPC_PORT: Envoy's ext_authz and rate limit filters call this listener. Bound first: a port in use stops start-up before anything listens.
  const rls = settings.rlsConfig === undefined ? undefined : new RlsSource(settings.rlsConfig, log)
  rls?.reload()
  // With worker threads every worker serves gRPC on its descriptor of the socket the supervisor bound, as for HTTP,
  // and charges the one byte budget the supervisor made for the process.
  const grpcBudget = new ByteBudget(settings.grpcMaxBufferedBytes, thread?.grpcBudget, thread?.workerId)
  // Every listener bound before anything reports listening; one that cannot listen stops start-up naming its setting (exit 2).
  const bind = binder(settings.host, () => Promise.allSettled([proxy?.close(), store.close()]))
  const grpc =
    settings.grpcPort === undefined
      ? undefined
      : await startGrpc(
          {
            decide,
            exposeReason: settings.exposeReason,
            encodedSlashes: settings.encodedSlashes,
            store,
            failPolicy: settings.failPolicy,
            rlsConfig: () => rls?.current ?? new Map(),
            rlsResponseHeaders: settings.rlsResponseHeaders,
            rlsMaxDescriptors: settings.rlsMaxDescriptors,
            bundleLoaded: () => bundles.current !== null,
            clock,
            metrics: createGrpcMetrics(metrics.registry, () => grpcBudget.held),
            log,
            tls: settings.grpcTls,
            maxConcurrentStreams: settings.grpcMaxConcurrentStreams,
            budget: grpcBudget,
            idleTimeoutMs: settings.grpcIdleTimeoutMs,
            streamTimeoutMs: settings.grpcStreamTimeoutMs,
          },
          thread ? { fd: thread.grpcFd!, shared: sharedListeners } : { port: settings.grpcPort, host: settings.host },
        ).then(
          bind.opened((g) => g.shutdown(0)),
          bind.failed('FAIRVISOR_GRPC_PORT', settings.grpcPort),
        )
  const listener = createListener({ settings, log, ...main })
  const address = await (thread ? listenOnFd(listener.server, thread.listenFd) : listener.listen(settings.port, settings.host)).then(
    bind.opened(() => closeServer(listener.server)),
    bind.failed('FAIRVISOR_PORT', settings.port),
  )
  const adminListener = separateAdmin ? createListener({ settings, log, routes: admin, fallback: notFound }) : undefined // FAIRVISOR_ADMIN_PORT
  const adminAddress =
    adminListener &&
    (await (thread ? listenOnFd(adminListener.server, thread.adminFd!) : adminListener.listen(settings.adminPort!, settings.host)).then(
      bind.opened(() => closeServer(adminListener.server)),
      bind.failed('FAIRVISOR_ADMIN_PORT', settings.adminPort!),
    ))
  // Hot reload on every way the file can be replaced (see bundle/watch.ts); SIGHUP forces a reload
  // and also sets the watch up anew, whatever became of the directory it was on. Workers reload when their supervisor says.
  const watcher = thread
    ? undefined
    : watchBundle(bundles, {
        onError: (err) =>
          log.error({ err: { message: err.message }, file: settings.configFile }, 'bundle watcher failed; the loaded bundle stays'),
        onDirectory: (state, dir) =>
          state === 'gone'
            ? log.warn(
                { dir, file: settings.configFile },
                'bundle directory removed; the loaded bundle stays, and the directory is watched for its return',
              )
            : log.info({ dir, file: settings.configFile }, 'bundle directory (re)created; watching it again'),
      })
  const onHup = (): void => {
    bundles.reload()
    void watcher?.rearm()
    rls?.reload()
  }
  if (!thread) process.on('SIGHUP', onHup)
  await watcher?.ready
  await net.watch(log)
  await rls?.watch()
  const started = {
    mode: settings.mode,
    host: address.address,
    port: address.port,
    adminPort: adminAddress?.port,
    grpcPort: grpc?.port,
    backend: settings.backendUrl?.origin,
    store: store.kind,
    version: VERSION,
  }
  log.info(started, thread ? 'worker listening' : `fairvisor listening on ${address.address}:${address.port}`)

  let closing: Promise<void> | undefined
  const shutdown = (): Promise<void> =>
    (closing ??= (async () => {
      log.info({ timeoutMs: settings.shutdownTimeoutMs }, 'shutting down: draining in-flight requests')
      process.off('SIGHUP', onHup)
      await Promise.all([watcher?.close(), net.close(), rls?.close()])
      await Promise.all([
        listener.shutdown(settings.shutdownTimeoutMs),
        adminListener?.shutdown(settings.shutdownTimeoutMs),
        grpc?.shutdown(settings.shutdownTimeoutMs),
      ])
      await Promise.allSettled([proxy?.close(), store.close()])
      log.info('shutdown complete')
    })())

  return { address, adminAddress, bundles, metrics, log, decide, shutdown }
}

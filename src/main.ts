/** Wiring: settings → observe → store → bundle source → engine → listeners. The only module that names concrete implementations (clock.ts reads the clock). */
import type { AddressInfo } from 'node:net'
import { binder, closeServer } from './bind-listeners.js'
import type { CompiledBundle } from './bundle/compile.js'
import { clock } from './clock.js'
import { BundleSource } from './bundle/source.js'
import { watchBundle } from './bundle/watch.js'
import { Engine } from './engine/evaluate.js'
import { SettingError } from './errors.js'
import { adminRoutes } from './http/admin.js'
import { createDecider, createLimitDecider, type Decide } from './decision/decide.js'
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
import { bundleWatchLog, logReload } from './observe/reload-log.js'
import { onReloadSignal } from './reload-signal.js'
import { makeTrustCheck } from './request/client-ip.js'
import { createJwtVerifier } from './request/jwt-verify.js'
import { NetworkData } from './request/network-data.js'
import type { Settings } from './settings.js'
import { createStore } from './store/factory.js'
import type { Store } from './store/store.js'
import { threadId } from 'node:worker_threads'
import { listenOnFd, sharedListeners, type ThreadContext } from './workers/context.js'
import { VERSION } from './version.js'

export { clock }
export interface Gateway {
  address: AddressInfo
  adminAddress: AddressInfo | undefined
  /** The bundle in force (null while none is). */
  bundle(): CompiledBundle | null
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
  // One thread reads, watches and reloads the bundle itself. A worker thread never reads the file: it runs
  // what its supervisor applied (workers/worker-config.ts), which reads, watches and reports for all.
  const own = thread ? undefined : ownConfig(settings, log, metrics)
  const bundle = thread ? () => thread.config.bundle() : () => own!.bundles.current
  metrics.bindLiveState({
    bundle,
    nowMs: clock,
    storeFill: () => store.fill?.(),
    leaseTableFull: () => store.leaseTableFull?.(),
  })
  await own?.start()
  const engine = new Engine({
    store,
    failPolicy: settings.failPolicy,
    observer: engineObserver(log, metrics, store.kind, settings.failPolicy, clock),
  })
  const trusted = settings.trustedProxiesText ? settings.trustedProxies : undefined
  const decided = decisionRecorder(metrics, log)
  const decide = createDecider({ engine, bundle, jwt, trusted, net, clock, decided })
  const proxy =
    settings.mode === 'reverse_proxy' ? createProxy({ settings, log, isTrustedPeer: makeTrustCheck(settings.trustedProxies) }) : undefined
  const admin = adminRoutes(bundle, store, settings.failPolicy, metrics, thread?.metricsText, thread && (() => thread.config.inSync()))
  const separateAdmin = settings.adminPort !== undefined // in both modes
  const debug = createDebugSessions(settings.debugSessionSecret, clock)
  const hooks = llmHooks(log, metrics, store, clock) // LLM settlement: usage read from responses, one store adjust each
  const llm = {
    bundle,
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
  // With worker threads every worker serves gRPC on its descriptor of the socket the supervisor bound, as for HTTP,
  // and charges the one byte budget the supervisor made for the process.
  const grpcBudget = new ByteBudget(settings.grpcMaxBufferedBytes, thread?.grpcBudget, thread?.workerId)
  // Every listener bound before anything reports listening; one that cannot listen stops start-up naming its setting (exit 2).
  const bind = binder(settings.host, () => Promise.allSettled([proxy?.close(), store.close(), own?.close()]))
  const grpc =
    settings.grpcPort === undefined
      ? undefined
      : await startGrpc(
          {
            decide,
            exposeReason: settings.exposeReason,
            encodedSlashes: settings.encodedSlashes,
            decideLimits: createLimitDecider({ engine, clock, decided }),
            rlsConfig: () => (thread ? thread.config.rls() : own!.rls?.current) ?? new Map(),
            rlsResponseHeaders: settings.rlsResponseHeaders,
            rlsMaxDescriptors: settings.rlsMaxDescriptors,
            bundleLoaded: () => bundle() !== null,
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
  await net.watch(log)
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
  // SIGHUPs that came while starting (held since the process began, see reload-signal.ts) make one reload now.
  const offHup = own ? onReloadSignal(own.onHup) : undefined

  let closing: Promise<void> | undefined
  const shutdown = (): Promise<void> =>
    (closing ??= (async () => {
      log.info({ timeoutMs: settings.shutdownTimeoutMs }, 'shutting down: draining in-flight requests')
      offHup?.()
      await Promise.all([own?.close(), net.close()])
      await Promise.all([
        listener.shutdown(settings.shutdownTimeoutMs),
        adminListener?.shutdown(settings.shutdownTimeoutMs),
        grpc?.shutdown(settings.shutdownTimeoutMs),
      ])
      await Promise.allSettled([proxy?.close(), store.close()])
      log.info('shutdown complete')
    })())

  return { address, adminAddress, bundle, metrics, log, decide, shutdown }
}

/**
 * The bundle and the RLS configuration of a gateway on one thread: read,
 * watched and reloaded here. The watches are armed before the first read, so
 * a file replaced at any moment of start-up is seen.
 */
function ownConfig(settings: Readonly<Settings>, log: Logger, metrics: Metrics) {
  const bundles = new BundleSource(settings.configFile, clock, { signingKey: settings.bundleSigningKey })
  bundles.onReload((r) => logReload(log, metrics, r, r.result === 'applied' ? bundles.current : null))
  const rls = settings.rlsConfig === undefined ? undefined : new RlsSource(settings.rlsConfig, log)
  // Hot reload on every way the file can be replaced (see bundle/watch.ts).
  const watcher = watchBundle(bundles, bundleWatchLog(log, settings.configFile))
  return {
    bundles,
    rls,
    async start(): Promise<void> {
      await Promise.all([watcher.ready, rls?.watch()])
      if (settings.configFile === undefined) log.warn('FAIRVISOR_CONFIG_FILE is not set: every request is answered 503 no_bundle_loaded')
      else bundles.reload()
      rls?.reload()
    },
    /** SIGHUP forces a reload and sets the watch up anew, whatever became of the directory it was on. */
    onHup(): void {
      bundles.reload()
      void watcher.rearm()
      rls?.reload()
    },
    close: (): Promise<unknown> => Promise.all([watcher.close(), rls?.close()]),
  }
}

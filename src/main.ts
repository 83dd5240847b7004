/**
 * Wiring: settings → observe → store → bundle feed → engine → front ends → listeners. The only module that names
 * concrete implementations. Whether it runs in one thread or in one worker thread of several is the runtime's
 * (runtime/runtime.ts): the same wiring serves both. clock.ts reads the clock; this module hands it on.
 */
import type { AddressInfo } from 'node:net'
import type { Context } from '@opentelemetry/api'
import type { CompiledBundle } from './bundle/compile.js'
import { clock } from './clock.js'
import { Engine } from './engine/evaluate.js'
import { ByteBudget } from './grpc/byte-budget.js'
import { createGrpcMetrics } from './grpc/metrics.js'
import { createGrpc } from './grpc/server.js'
import { adminApi, adminDisabled } from './admin/api.js'
import { recordRejects, rejectedKeys } from './admin/top.js'
import { adminListener, adminRoutes } from './http/admin.js'
import { createDecider, createLimitDecider, type Decide } from './decision/decide.js'
import { HoldSlots } from './decision/hold-slots.js'
import { Holds } from './decision/holds.js'
import { createDebugSessions } from './http/debug-session.js'
import { createProxy } from './http/proxy.js'
import { createRoutes } from './http/routes.js'
import { createListener } from './http/server.js'
import { SlotHolds } from './http/slot-holds.js'
import { LlmExchange } from './llm/exchange.js'
import { threadView } from './observe/admin-view.js'
import { decisionRecorder, engineObserver, jwtRejections, slotsDropped } from './observe/engine-observer.js'
import { giveBackHook, holdHooks, settleByStatus } from './observe/give-back.js'
import { llmHooks } from './observe/llm-observer.js'
import type { Logger } from './observe/logger.js'
import { createMetrics, type Metrics } from './observe/metrics.js'
import { rlsStatsOf } from './observe/rls-stats-sinks.js'
import { tracedDecide, tracedDecideLimits } from './observe/decision-spans.js'
import { startTracing } from './observe/tracing.js'
import { makeTrustCheck } from './request/client-ip.js'
import { createJwtVerifier } from './request/jwt-verify.js'
import { NetworkData } from './request/network-data.js'
import { oneThread } from './runtime/one-thread.js'
import type { Runtime } from './runtime/runtime.js'
import type { Settings } from './settings.js'
import { openStore } from './store/open.js'
import { VERSION } from './version.js'
import type { RlsConfig } from './grpc/rls-config.js'

/** No FAIRVISOR_RLS_CONFIG: RLS calls have no configured limits (a bundle may still limit them). */
const NO_RLS_FILE: RlsConfig = new Map()

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

export async function startGateway(settings: Readonly<Settings>, runtime: Runtime = oneThread(settings, clock)): Promise<Gateway> {
  const log = runtime.logger(settings.logLevel)
  const metrics = createMetrics()
  metrics.buildInfo.set({ version: VERSION }, 1)
  // Before any connection opens: a bad JWT key source or data file stops start-up (exit 2).
  const jwt = createJwtVerifier(settings)
  const net = new NetworkData(settings, runtime.net)
  // Traces (FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT): this thread's own exporter; off, nothing of the SDK is loaded.
  const worker = runtime.workerId
  const stopTracing = await startTracing(settings, worker)
  if (stopTracing) log.info({ url: settings.otlpTracesUrl, sampler: settings.sampler }, 'exporting traces over OTLP/HTTP')
  const store = await openStore(settings.storeConfig, { log, clock, shared: runtime.tables })
  const config = runtime.config(log, metrics)
  const bundle = (): CompiledBundle | null => config.bundle()
  // FAIRVISOR_MAX_DELAYED: one count of held requests for the process, whichever thread holds them.
  const slots = new HoldSlots(settings.maxDelayed, runtime.holdSlots?.shared, runtime.holdSlots?.holder)
  // Concurrency slots of forwarded requests, given back when each exchange ends.
  const inFlight = new SlotHolds(store, clock, slotsDropped(log, metrics, store.kind, clock))
  metrics.bindLiveState({
    bundle,
    nowMs: clock,
    storeFill: () => store.fill?.(),
    leaseTableFull: () => store.leaseTableFull?.(),
    storeCleanupErrors: () => store.cleanupErrors?.(),
    delayedHeld: () => slots.total,
    slots: () => inFlight,
  })
  await config.start()
  const { failPolicy, exposeReason } = settings
  // The admin API's top keys: each reject counted in a bounded sketch, only when the API is on.
  const top = rejectedKeys(settings, clock())
  const observer = { ...engineObserver(log, metrics, store.kind, failPolicy, clock), rejected: top && recordRejects(top) }
  const engine = new Engine({ store, failPolicy, observer, llmMaxRetryAfterS: settings.llmMaxRetryAfterS })
  const trusted = settings.trustedProxiesText ? settings.trustedProxies : undefined
  const decided = decisionRecorder(metrics, log)
  const jwtRejected = jwtRejections(log, metrics, clock)
  // Charges given back after the decision (a held request not forwarded, a response status not counted): one store adjust each.
  const giveBack = giveBackHook(log, metrics, store, clock)
  const holds = new Holds(slots, holdHooks(metrics, giveBack))
  const untraced = createDecider({ engine, bundle, jwt, trusted, net, clock, decided, jwtRejected, holds })
  // Tracing on: a span per decision; off, the deciders are called as they are (nothing wrapped).
  const spans = { store: store.kind, worker }
  const decide = stopTracing ? tracedDecide(untraced, spans) : untraced
  const limitDecider = createLimitDecider({ engine, clock, decided })
  const proxy =
    settings.mode === 'reverse_proxy' ? createProxy({ settings, log, isTrustedPeer: makeTrustCheck(settings.trustedProxies) }) : undefined
  const admin = adminRoutes(bundle, store, failPolicy, metrics, runtime.metricsText, config.inSync?.bind(config))
  const separateAdmin = settings.adminPort !== undefined // FAIRVISOR_ADMIN_PORT, in both modes
  const debug = createDebugSessions(settings.debugSessionSecret, clock)
  const hooks = llmHooks(log, metrics, store, clock) // LLM settlement: usage read from responses, one store adjust each
  const exchange = (r: ConstructorParameters<typeof LlmExchange>[0], s?: ConstructorParameters<typeof LlmExchange>[3], trace?: Context) =>
    new LlmExchange(r, hooks, settings.llmMaxEventBytes, s, settings.llmToolCallGraceTokens, trace)
  const llm = { bundle, exchange, streamUsage: settings.llmStreamUsage }
  const settleStatus = settleByStatus(metrics, giveBack)
  const routes = createRoutes({
    decide,
    exposeReason,
    debug,
    proxy,
    admin: separateAdmin ? new Map() : admin,
    paths: settings,
    llm,
    settleStatus,
    worker,
    slots: inFlight,
  })
  const main = createListener({ settings, log, ...routes })
  const view = runtime.processView(() => threadView(top, metrics, clock()))
  const token = settings.adminToken
  const api = token === undefined ? adminDisabled : adminApi({ token, bundle, store, failPolicy, settings, view, log, clock })
  const adminServer = separateAdmin ? createListener({ settings, log, ...adminListener(admin, api) }) : undefined
  // FAIRVISOR_GRPC_PORT: Envoy's ext_authz and rate limit filters call this listener; every thread of the process charges one byte budget.
  const budget = new ByteBudget(settings.grpcMaxBufferedBytes, runtime.grpcBudget?.shared, runtime.grpcBudget?.holder)
  // envoyproxy/ratelimit's statistics of this thread: on /metrics and, with USE_STATSD, sent to statsd.
  const rls = settings.grpcPort === undefined && settings.rlsConfig === undefined ? undefined : rlsStatsOf(metrics.registry, settings, log)
  const grpc =
    settings.grpcPort === undefined
      ? undefined
      : createGrpc({
          decide,
          exposeReason,
          encodedSlashes: settings.encodedSlashes,
          decideLimits: stopTracing ? tracedDecideLimits(limitDecider, spans) : limitDecider,
          rlsChargeRejected: !settings.rlsStopIncrementWhenOverLimit,
          // Without FAIRVISOR_RLS_CONFIG only the bundle limits RLS calls; with it, nothing loaded is an error per call.
          rlsConfig: settings.rlsConfig === undefined ? () => NO_RLS_FILE : () => config.rls(),
          rlsResponseHeaders: settings.rlsResponseHeaders,
          rlsHeaderNames: settings.rlsHeaderNames,
          rlsMaxDescriptors: settings.rlsMaxDescriptors,
          rlsStoreFailure: settings.rlsStoreFailure,
          rlsShadowMode: settings.rlsShadowMode,
          rlsQuotaMode: settings.rlsQuotaMode,
          rlsDynamicMetadata: settings.rlsDynamicMetadata,
          bundleLoaded: () => bundle() !== null,
          metrics: createGrpcMetrics(metrics.registry, () => budget.held),
          rlsStats: rls?.stats,
          log,
          tls: settings.grpcTls,
          maxConcurrentStreams: settings.grpcMaxConcurrentStreams,
          budget,
          idleTimeoutMs: settings.grpcIdleTimeoutMs,
          streamTimeoutMs: settings.grpcStreamTimeoutMs,
          worker,
        })
  // Every listener bound before anything reports listening; one that cannot listen stops start-up naming its setting (exit 2).
  const at = await runtime.listen({ main: main.server, admin: adminServer?.server, grpc: grpc?.server }).catch(async (err: Error) => {
    await Promise.allSettled([proxy?.close(), store.close(), config.close(), stopTracing?.()])
    throw err
  })
  await net.watch(log)
  runtime.started(log, at, store.kind)

  const drain = settings.shutdownTimeoutMs
  let closing: Promise<void> | undefined
  const shutdown = (): Promise<void> =>
    (closing ??= (async () => {
      log.info({ timeoutMs: drain }, 'shutting down: draining in-flight requests')
      runtime.stopping()
      await Promise.all([config.close(), net.close()])
      await Promise.all([main.shutdown(drain), adminServer?.shutdown(drain), grpc?.shutdown(drain)])
      // The spans of the last requests leave before the process does.
      await Promise.allSettled([proxy?.close(), store.close(), rls?.close(), stopTracing?.()])
      log.info('shutdown complete')
    })())
  return { address: at.main!, adminAddress: at.admin, bundle, metrics, log, decide, shutdown }
}

/**
 * The runtime of a process of one thread (FAIRVISOR_WORKERS=1): it listens
 * on the host and ports of the settings, keeps its counters and data files
 * to itself, reads and watches the bundle itself, and reloads it on SIGHUP.
 */
import { listenAll, LISTENERS } from '../listeners.js'
import { createLogger } from '../observe/logger.js'
import { logReload } from '../observe/reload-log.js'
import { rlsLoadsOf } from '../observe/rls-stats-sinks.js'
import { onReloadSignal } from '../reload-signal.js'
import type { Settings } from '../settings.js'
import { ConfigSource } from './config-source.js'
import { listeningFields, logAdminApi, ports, type Runtime } from './runtime.js'

export function oneThread(settings: Readonly<Settings>, clock: () => number): Runtime {
  let source: ConfigSource | undefined
  let offHup: (() => void) | undefined
  return {
    logger: createLogger,
    tables: undefined,
    net: undefined,
    grpcBudget: undefined,
    holdSlots: undefined,
    metricsText: undefined,
    config(log, metrics) {
      source = new ConfigSource(settings, log, clock, {
        reloaded: (r) => logReload(log, metrics, r, r.result === 'applied' ? source!.bundles.current : null),
        // Into the thread's RLS statistics, which the gateway's shutdown flushes (main.ts).
        rlsLoadResult: rlsLoadsOf(metrics.registry, settings, log)?.loaded,
      })
      return source
    },
    listen: (servers) => listenAll(servers, (name) => ({ host: settings.host, port: LISTENERS[name].port(settings) }), settings),
    started(log, at, store) {
      const { address, port } = at.main!
      log.info(listeningFields(settings, address, ports(at), store), `fairvisor listening on ${address}:${port}`)
      logAdminApi(log, settings, at.admin?.port)
      // SIGHUPs that came while starting (held since the process began, see reload-signal.ts) make one reload now.
      if (source) offHup = onReloadSignal(source.onHup)
    },
    stopping: () => offHup?.(),
    processView: (local) => async () => ({ ...(await local()), reloads: source?.history.list() ?? [] }),
  }
}

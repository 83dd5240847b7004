/**
 * The start-up the store benchmarks (budget, postgres, redis) share: their
 * argument list, CPU placement, a Redis server and a backend of their own,
 * gateways on one bundle that differ only by FAIRVISOR_STORE, and the summary
 * table's standard columns.
 *
 *   const { noPin, nums } = benchArgs()
 *   const bench = await startStoreBench({ bundleFile, pin: !noPin })
 *   try { const gw = await bench.gateway(bench.redis.url) … } finally { await bench.stop() }
 */
import { startRedis, type RedisServer } from '../helpers/redis-servers.js'
import { pinCpus, type LoadResult, type Running, startBackendProcess, startGatewayProcess, stopAll } from './lib.js'

/** The command line: an optional leading `--no-pin`, then numbers (each a default when absent). */
export function benchArgs(argv = process.argv.slice(2)): { noPin: boolean; nums: number[] } {
  const noPin = argv[0] === '--no-pin'
  return { noPin, nums: (noPin ? argv.slice(1) : argv).map(Number) }
}

export interface StoreBench {
  /** Where the gateways run and where everything else does; undefined when nothing is pinned. */
  pin: { gateway: string; rest: string } | undefined
  redis: RedisServer
  backend: Running
  /** A fresh gateway in front of the backend on `store` (a FAIRVISOR_STORE value), on the gateway CPU. */
  gateway(store: string, env?: Record<string, string>): Promise<Running>
  /** How the processes were placed, for the summary line. */
  placement(rest: string): string
  /** Every process this benchmark started, Redis included. */
  stop(): Promise<void>
}

export async function startStoreBench(o: { bundleFile: string; pin: boolean; env?: Record<string, string> }): Promise<StoreBench> {
  // Pin first: the servers started next inherit the non-gateway CPUs.
  const pin = o.pin ? pinCpus() : undefined
  const redis = await startRedis()
  const stop = async (): Promise<void> => {
    await stopAll()
    await redis.stop()
  }
  let backend: Running
  try {
    backend = await startBackendProcess()
  } catch (err) {
    await stop()
    throw err
  }
  const base = { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: o.bundleFile, FAIRVISOR_LOG_LEVEL: 'info', ...o.env }
  return {
    pin,
    redis,
    backend,
    gateway: (store, env) => startGatewayProcess({ ...base, FAIRVISOR_STORE: store, ...env }, [], pin?.gateway),
    placement: (rest) => (pin ? `gateways on CPU ${pin.gateway}, ${rest} on CPU ${pin.rest}` : 'no CPU pinning'),
    stop,
  }
}

/** The standard columns of a summary row: median req/s, p50, p99 and the totals. */
export const RESULT_HEADER = ['target', 'req/s (median)', 'p50 ms', 'p99 ms', 'requests', 'non-2xx', 'errors']

export function resultRow(name: string, s: LoadResult): string[] {
  return [name, String(Math.round(s.rps)), s.p50Ms.toFixed(2), s.p99Ms.toFixed(2), String(s.requests), String(s.non2xx), String(s.errors)]
}

/** All requests of the runs of `name`: the verdicts compare totals (same seconds per side). */
export function totalRequests(runs: ReadonlyMap<string, readonly LoadResult[]>, name: string): number {
  return runs.get(name)!.reduce((sum, r) => sum + r.requests, 0)
}

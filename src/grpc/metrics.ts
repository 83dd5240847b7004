/** gRPC metrics on the gateway's registry; every label takes a bounded set of values. */
import { Counter, type Registry } from 'prom-client'

export interface GrpcMetrics {
  calls: Counter<'method' | 'code'>
  rlsDecisions: Counter<'domain' | 'code'>
}

export function createGrpcMetrics(registry: Registry): GrpcMetrics {
  const registers = [registry]
  return {
    calls: new Counter({
      name: 'fairvisor_grpc_calls_total',
      help: 'gRPC calls by method and gRPC status code name.',
      labelNames: ['method', 'code'],
      registers,
    }),
    rlsDecisions: new Counter({
      name: 'fairvisor_rls_decisions_total',
      help: 'ShouldRateLimit answers by configured domain (_unknown for any other) and overall code (ok, over_limit, store_failed_ok, store_failed_over_limit).',
      labelNames: ['domain', 'code'],
      registers,
    }),
  }
}

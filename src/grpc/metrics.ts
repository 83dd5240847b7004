/** gRPC metrics on the gateway's registry; every label takes a bounded set of values. */
import { Counter, Gauge, type Registry } from 'prom-client'

export interface GrpcMetrics {
  calls: Counter<'method' | 'code'>
  rlsDecisions: Counter<'domain' | 'code'>
  rlsTooManyDescriptors: Counter
}

/** `buffered`: the bytes this thread's unfinished gRPC requests hold now (with workers, /metrics sums the threads'). */
export function createGrpcMetrics(registry: Registry, buffered: () => number): GrpcMetrics {
  const registers = [registry]
  new Gauge({
    name: 'fairvisor_grpc_buffered_bytes',
    help: 'Bytes held by gRPC requests not yet whole, against FAIRVISOR_GRPC_MAX_BUFFERED_BYTES.',
    registers,
    collect() {
      this.set(buffered())
    },
  })
  return {
    calls: new Counter({
      name: 'fairvisor_grpc_calls_total',
      help: 'gRPC calls by method and gRPC status code name.',
      labelNames: ['method', 'code'],
      registers,
    }),
    rlsDecisions: new Counter({
      name: 'fairvisor_rls_decisions_total',
      help: 'ShouldRateLimit answers by configured domain (_unknown for any other) and overall code (ok, over_limit, store_failed_ok, store_failed_over_limit, store_error).',
      labelNames: ['domain', 'code'],
      registers,
    }),
    rlsTooManyDescriptors: new Counter({
      name: 'fairvisor_rls_too_many_descriptors_total',
      help: 'ShouldRateLimit calls refused (RESOURCE_EXHAUSTED) for carrying more descriptors than FAIRVISOR_RLS_MAX_DESCRIPTORS.',
      registers,
    }),
  }
}

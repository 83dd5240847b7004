/**
 * The OpenTelemetry SDK of one thread, built only when tracing is on (tracing.ts imports this module
 * then): a tracer whose spans are batched (BatchSpanProcessor, which reads the standard OTEL_BSP_*
 * variables) and posted as OTLP protobuf over HTTP, the sampler the settings name, and the W3C Trace
 * Context propagator. Each worker thread builds its own: spans leave from the thread that made them,
 * none cross threads, and the resource names the worker.
 */
import type { TextMapPropagator, Tracer } from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
} from '@opentelemetry/sdk-trace-base'
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions'
import type { SamplerName, TraceSettings } from '../settings-trace.js'
import { VERSION } from '../version.js'
import { ATTR } from './tracing.js'

export interface ThreadTracing {
  tracer: Tracer
  propagator: TextMapPropagator
  /** Exports what is still batched, then stops. */
  shutdown(): Promise<void>
}

/** OTEL_TRACES_SAMPLER as the SDK reads it: parent-based ones follow a sampled (or not) parent, and apply theirs to a root. */
export function samplerOf(name: SamplerName, ratio: number): Sampler {
  const root = name.endsWith('always_on')
    ? new AlwaysOnSampler()
    : name.endsWith('always_off')
      ? new AlwaysOffSampler()
      : new TraceIdRatioBasedSampler(ratio)
  return name.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root
}

export function createTracing(settings: TraceSettings, url: string, worker: number | undefined): ThreadTracing {
  const ours = resourceFromAttributes({
    [ATTR_SERVICE_NAME]: settings.serviceName,
    [ATTR_SERVICE_VERSION]: VERSION,
    ...(worker === undefined ? {} : { [ATTR.worker]: worker }),
  })
  // OTEL_RESOURCE_ATTRIBUTES (deployment, cluster, …) under ours: the service name the settings read wins.
  const resource = detectResources({ detectors: [envDetector] }).merge(ours)
  const provider = new BasicTracerProvider({
    resource,
    sampler: samplerOf(settings.sampler, settings.samplerRatio),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }))],
  })
  return {
    tracer: provider.getTracer('fairvisor', VERSION),
    propagator: new W3CTraceContextPropagator(),
    shutdown: () => provider.shutdown(),
  }
}

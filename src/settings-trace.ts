/**
 * Traces (observe/tracing.ts): where spans go and which are kept, parsed as settings.ts parses the rest.
 * Besides FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT, the OpenTelemetry SDK's standard variables are read
 * here, so that a deployment that already sets them for its other services carries over, and a bad
 * value stops start-up naming its variable instead of being dropped by the SDK with a warning.
 */
import { SettingError } from './errors.js'
import { oneOf, optional, type Env } from './settings-env.js'

/** OTEL_TRACES_SAMPLER values the gateway takes (the SDK's own, but the remote-configured Jaeger and X-Ray ones). */
export const SAMPLERS = [
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
  'always_on',
  'always_off',
  'traceidratio',
] as const
export type SamplerName = (typeof SAMPLERS)[number]

export interface TraceSettings {
  /** Full OTLP/HTTP (protobuf) URL spans are posted to; undefined: tracing is off (the default). */
  otlpTracesUrl: string | undefined
  /** OTEL_SERVICE_NAME, default `fairvisor`. */
  serviceName: string
  /** OTEL_TRACES_SAMPLER, default parentbased_always_on (the SDK's default). */
  sampler: SamplerName
  /** OTEL_TRACES_SAMPLER_ARG: the kept fraction of the ratio samplers, from 0 to 1, default 1. */
  samplerRatio: number
}

const TRACES_PATH = 'v1/traces'

function httpUrl(name: string, raw: string): URL {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new SettingError(name, `"${raw}" is not a URL; use an http(s) URL like http://127.0.0.1:4318`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new SettingError(name, `"${raw}" must use http or https (spans are sent over OTLP/HTTP)`)
  return url
}

/**
 * A base endpoint, as OTEL_EXPORTER_OTLP_ENDPOINT is: `v1/traces` is appended to its path, unless the path
 * already ends with it (an operator who wrote the full URL means it, and would otherwise get no traces).
 */
function baseEndpoint(name: string, raw: string): string {
  const url = httpUrl(name, raw)
  if (url.pathname.replace(/\/+$/, '').endsWith(`/${TRACES_PATH}`)) return url.href
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/${TRACES_PATH}`
  return url.href
}

/** OTEL_TRACES_SAMPLER_ARG: a fraction, read for the ratio samplers only (the SDK ignores it for the others). */
function ratio(env: Env, sampler: SamplerName): number {
  const name = 'OTEL_TRACES_SAMPLER_ARG'
  const raw = optional(env, name)
  if (raw === undefined || !sampler.endsWith('traceidratio')) return 1
  const n = Number(raw.trim())
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1)
    throw new SettingError(name, `"${raw}" is not a number from 0 to 1 (the fraction of traces ${sampler} keeps)`)
  return n
}

/**
 * FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT wins, then OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (a full URL, used as
 * it is), then OTEL_EXPORTER_OTLP_ENDPOINT; none set: tracing is off.
 */
export function traceSettings(env: Env): TraceSettings {
  const ours = optional(env, 'FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT')
  const traces = optional(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
  const base = optional(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')
  const otlpTracesUrl =
    ours !== undefined
      ? baseEndpoint('FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT', ours)
      : traces !== undefined
        ? httpUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', traces).href
        : base !== undefined
          ? baseEndpoint('OTEL_EXPORTER_OTLP_ENDPOINT', base)
          : undefined
  const sampler = oneOf(env, 'OTEL_TRACES_SAMPLER', SAMPLERS, 'parentbased_always_on')
  return { otlpTracesUrl, serviceName: optional(env, 'OTEL_SERVICE_NAME') ?? 'fairvisor', sampler, samplerRatio: ratio(env, sampler) }
}

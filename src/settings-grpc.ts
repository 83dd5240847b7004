/** The gRPC listener's settings (its port, TLS files and the RLS configuration), parsed as settings.ts parses the rest. */
import { readFileSync } from 'node:fs'
import { SettingError } from './errors.js'
import { MAX_BUDGET_BYTES } from './grpc/byte-budget.js'
import { bool, integer, oneOf, optional, parseSize, type Env } from './settings-env.js'
import { RLS_HEADER_NAMES, type RlsHeaderNames } from './decision/rls-answer.js'

export interface GrpcSettings {
  /** gRPC listener (Envoy ext_authz v3, Rate Limit Service v3, health); off when unset. */
  grpcPort: number | undefined
  /** PEM certificate chain and key (FAIRVISOR_GRPC_TLS_CERT_FILE / _KEY_FILE): the gRPC listener speaks TLS. With a
   *  client CA (FAIRVISOR_GRPC_TLS_CLIENT_CA_FILE) every client must present a certificate that chains to it (mTLS). */
  grpcTls: { cert: Buffer; key: Buffer; ca?: Buffer } | undefined
  /** envoyproxy/ratelimit YAML configuration: a file or a directory of .yaml files. */
  rlsConfig: string | undefined
  /** One domain may be split over several files, merged (FAIRVISOR_RLS_MERGE_DOMAIN_CONFIG, or envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG). */
  rlsMergeDomainConfig: boolean
  /** Add RateLimit-Limit / -Remaining / -Reset to ShouldRateLimit answers. */
  rlsResponseHeaders: boolean
  /** The names of those headers: envoyproxy/ratelimit's LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER. */
  rlsHeaderNames: RlsHeaderNames
  /** A rejected ShouldRateLimit call charges only its descriptors that go over (envoyproxy/ratelimit's switch of the same name, off by default). */
  rlsStopIncrementWhenOverLimit: boolean
  /** A ShouldRateLimit call whose store failed: `error` (UNKNOWN, as envoyproxy/ratelimit) or `policy` (FAIRVISOR_FAIL_POLICY's statuses). */
  rlsStoreFailure: 'error' | 'policy'
  /** No ShouldRateLimit call is answered OVER_LIMIT, limits still counted (FAIRVISOR_RLS_SHADOW_MODE, or envoyproxy/ratelimit's SHADOW_MODE). */
  rlsShadowMode: boolean
  /** Every descriptor in quota_mode (FAIRVISOR_RLS_QUOTA_MODE, or envoyproxy/ratelimit's QUOTA_MODE). */
  rlsQuotaMode: boolean
  /** ShouldRateLimit answers carry dynamic_metadata (FAIRVISOR_RLS_RESPONSE_DYNAMIC_METADATA, or RESPONSE_DYNAMIC_METADATA). */
  rlsDynamicMetadata: boolean
  /** Descriptors one ShouldRateLimit call may carry; a call with more is refused (RESOURCE_EXHAUSTED). */
  rlsMaxDescriptors: number
  /** envoyproxy/ratelimit's near_limit threshold, a fraction of each limit (its NEAR_LIMIT_RATIO). */
  rlsNearLimitRatio: number
  /** Where envoyproxy/ratelimit's statistics go as statsd counters (its USE_STATSD, STATSD_HOST, STATSD_PORT, STATS_FLUSH_INTERVAL); undefined: not sent. */
  rlsStatsd: { host: string; port: number; intervalMs: number } | undefined
  /** Statistics keys built from requests' values kept apart per thread; past it they count under `<domain>._overflow`. */
  rlsStatsMaxKeys: number
  /** HTTP/2 streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
  grpcMaxConcurrentStreams: number
  /** Bytes the unfinished requests of every gRPC stream may hold together, for the whole process. */
  grpcMaxBufferedBytes: number
  /** A connection without an open stream for this long is closed (GOAWAY). Default FAIRVISOR_KEEPALIVE_TIMEOUT_MS's value. */
  grpcIdleTimeoutMs: number
  /** A call unanswered after this long (or after its grpc-timeout, when shorter) is DEADLINE_EXCEEDED. Default FAIRVISOR_HEADERS_TIMEOUT_MS's value. */
  grpcStreamTimeoutMs: number
}

function pem(env: Env, name: string): Buffer | undefined {
  const file = optional(env, name)
  if (file === undefined) return undefined
  try {
    return readFileSync(file)
  } catch (err) {
    throw new SettingError(name, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
  }
}

function tls(env: Env): GrpcSettings['grpcTls'] {
  const cert = pem(env, 'FAIRVISOR_GRPC_TLS_CERT_FILE')
  const key = pem(env, 'FAIRVISOR_GRPC_TLS_KEY_FILE')
  const ca = pem(env, 'FAIRVISOR_GRPC_TLS_CLIENT_CA_FILE')
  if (cert === undefined && key === undefined) {
    if (ca !== undefined) throw new SettingError('FAIRVISOR_GRPC_TLS_CLIENT_CA_FILE', 'needs FAIRVISOR_GRPC_TLS_CERT_FILE and _KEY_FILE')
    return undefined
  }
  if (cert === undefined) throw new SettingError('FAIRVISOR_GRPC_TLS_CERT_FILE', 'is needed with FAIRVISOR_GRPC_TLS_KEY_FILE')
  if (key === undefined) throw new SettingError('FAIRVISOR_GRPC_TLS_KEY_FILE', 'is needed with FAIRVISOR_GRPC_TLS_CERT_FILE')
  return ca === undefined ? { cert, key } : { cert, key, ca }
}

/** From 8m, so that a whole 4 MiB message fits in the seven eighths large requests may use; to 1g, what the 32-bit count holds. */
function bufferedBytes(env: Env): number {
  const name = 'FAIRVISOR_GRPC_MAX_BUFFERED_BYTES'
  const raw = optional(env, name) ?? '64m'
  const n = parseSize(raw)
  if (n === undefined || n < 8 * 1024 ** 2 || n > MAX_BUDGET_BYTES)
    throw new SettingError(name, `"${raw}" is not a size from 8m to 1g; use bytes or a number with k, m or g (e.g. 64m)`)
  return n
}

/** A fraction from 0 to 1 (NEAR_LIMIT_RATIO's range). */
function ratio(env: Env, name: string, dflt: number): number {
  const raw = optional(env, name)
  if (raw === undefined) return dflt
  const n = Number(raw.trim())
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1) throw new SettingError(name, `"${raw}" is not a number from 0 to 1`)
  return n
}

const GO_UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** Milliseconds of a Go duration (`10s`, `1m30s`, `500ms`), the form of envoyproxy/ratelimit's STATS_FLUSH_INTERVAL. */
export function goDurationMs(raw: string): number | undefined {
  const s = raw.trim()
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(s)) return undefined
  let ms = 0
  for (const m of s.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(m[1]) * GO_UNITS[m[2]!]!
  return ms
}

function statsd(env: Env): GrpcSettings['rlsStatsd'] {
  // envoyproxy/ratelimit's names are read too (ours first); its USE_STATSD defaults to true there, off here:
  // a gateway sends no datagrams unasked (its statistics are on /metrics either way).
  const on = bool(env, 'FAIRVISOR_RLS_USE_STATSD', bool(env, 'USE_STATSD', false))
  const host = optional(env, 'FAIRVISOR_RLS_STATSD_HOST') ?? optional(env, 'STATSD_HOST') ?? 'localhost'
  const port = integer(env, 'FAIRVISOR_RLS_STATSD_PORT', integer(env, 'STATSD_PORT', 8125, 1, 65535), 1, 65535)
  const upstream = optional(env, 'STATS_FLUSH_INTERVAL')
  const upstreamMs = upstream === undefined ? 10_000 : goDurationMs(upstream)
  if (upstreamMs === undefined || upstreamMs < 1 || upstreamMs > 3_600_000)
    throw new SettingError('STATS_FLUSH_INTERVAL', `"${upstream}" is not a duration from 1ms to 1h (e.g. 10s)`)
  const intervalMs = integer(env, 'FAIRVISOR_RLS_STATS_FLUSH_INTERVAL_MS', Math.round(upstreamMs), 1, 3_600_000)
  return on ? { host, port, intervalMs } : undefined
}

/** `http`: the HTTP listener's timeouts, the defaults of the gRPC listener's. */
export function grpcSettings(env: Env, http: { keepAliveTimeoutMs: number; headersTimeoutMs: number }): GrpcSettings {
  return {
    grpcPort: optional(env, 'FAIRVISOR_GRPC_PORT') === undefined ? undefined : integer(env, 'FAIRVISOR_GRPC_PORT', 0, 0, 65535),
    grpcTls: tls(env),
    rlsConfig: optional(env, 'FAIRVISOR_RLS_CONFIG'),
    // envoyproxy/ratelimit's own name is read too, so its deployment's environment carries over; ours wins when both are set.
    rlsMergeDomainConfig: bool(env, 'FAIRVISOR_RLS_MERGE_DOMAIN_CONFIG', bool(env, 'MERGE_DOMAIN_CONFIG', false)),
    // envoyproxy/ratelimit's switch and header names are read too (ours wins when both are set).
    rlsResponseHeaders: bool(env, 'FAIRVISOR_RLS_RESPONSE_HEADERS', bool(env, 'LIMIT_RESPONSE_HEADERS_ENABLED', false)),
    rlsHeaderNames: {
      limit: optional(env, 'LIMIT_LIMIT_HEADER') ?? RLS_HEADER_NAMES.limit,
      remaining: optional(env, 'LIMIT_REMAINING_HEADER') ?? RLS_HEADER_NAMES.remaining,
      reset: optional(env, 'LIMIT_RESET_HEADER') ?? RLS_HEADER_NAMES.reset,
    },
    // envoyproxy/ratelimit's own name is read too, so that its deployment's environment carries over.
    rlsStopIncrementWhenOverLimit: bool(
      env,
      'FAIRVISOR_RLS_STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT',
      bool(env, 'STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT', false),
    ),
    // envoyproxy/ratelimit answers a Redis error with an error and leaves the choice to Envoy (failure_mode_deny).
    rlsStoreFailure: oneOf(env, 'FAIRVISOR_RLS_STORE_FAILURE', ['error', 'policy'] as const, 'error'),
    // envoyproxy/ratelimit's global switches, under its names too (ours wins when both are set); off by default, as there.
    rlsShadowMode: bool(env, 'FAIRVISOR_RLS_SHADOW_MODE', bool(env, 'SHADOW_MODE', false)),
    rlsQuotaMode: bool(env, 'FAIRVISOR_RLS_QUOTA_MODE', bool(env, 'QUOTA_MODE', false)),
    rlsDynamicMetadata: bool(env, 'FAIRVISOR_RLS_RESPONSE_DYNAMIC_METADATA', bool(env, 'RESPONSE_DYNAMIC_METADATA', false)),
    rlsMaxDescriptors: integer(env, 'FAIRVISOR_RLS_MAX_DESCRIPTORS', 256, 1, 1_000_000),
    rlsNearLimitRatio: ratio(env, 'FAIRVISOR_RLS_NEAR_LIMIT_RATIO', ratio(env, 'NEAR_LIMIT_RATIO', 0.8)),
    rlsStatsd: statsd(env),
    rlsStatsMaxKeys: integer(env, 'FAIRVISOR_RLS_STATS_MAX_KEYS', 1000, 0, 1_000_000),
    grpcMaxConcurrentStreams: integer(env, 'FAIRVISOR_GRPC_MAX_CONCURRENT_STREAMS', 1000, 1, 1_000_000),
    grpcMaxBufferedBytes: bufferedBytes(env),
    grpcIdleTimeoutMs: integer(env, 'FAIRVISOR_GRPC_IDLE_TIMEOUT_MS', http.keepAliveTimeoutMs, 1, 3_600_000),
    grpcStreamTimeoutMs: integer(env, 'FAIRVISOR_GRPC_STREAM_TIMEOUT_MS', http.headersTimeoutMs, 1, 600_000),
  }
}

/**
 * Environment → one frozen Settings object. Every variable is parsed here and
 * nowhere else; a bad value throws a SettingError naming the variable and what
 * is allowed, and the CLI turns that into one line on stderr and exit code 2.
 */
import type { BlockList } from 'node:net'
import type { LoadOptions } from './bundle/load.js'
import { SettingError } from './errors.js'
import { distinctPorts } from './listeners.js'
import type { JwtVerifierSettings } from './request/jwt-verify.js'
import type { NetworkFiles } from './request/network-data.js'
import type { PathSettings } from './request/target.js'
import { parseTrustedProxies } from './request/trusted-proxies.js'
import { adminSettings, type AdminSettings } from './settings-admin.js'
import { bool, integer, oneOf, optional, secret, size, type Env } from './settings-env.js'
import { grpcSettings, type GrpcSettings } from './settings-grpc.js'
import { storeSettings, type StoreSettings } from './settings-store.js'
import { traceSettings, type TraceSettings } from './settings-trace.js'
import type { FailPolicy } from './store/store.js'
import { recording, refuseUnknown } from './unknown-settings.js'
import { defaultWorkers } from './workers/cores.js'

export type { FailPolicy, NetworkFiles }
export { parseTrustedProxies }

export type Mode = 'reverse_proxy' | 'decision_service'
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent'

export interface Settings
  extends GrpcSettings,
    PathSettings,
    StoreSettings,
    NetworkFiles,
    JwtVerifierSettings,
    AdminSettings,
    TraceSettings {
  mode: Mode
  /** Upstream origin for reverse_proxy mode, e.g. http://127.0.0.1:3000 */
  backendUrl: URL | undefined
  host: string
  /** 0 picks a free port; the bound port is logged at start-up. */
  port: number
  /** When set, /livez /readyz /metrics (and the admin API, with FAIRVISOR_ADMIN_TOKEN) are served here instead of the main listener, in both modes. */
  adminPort: number | undefined
  logLevel: LogLevel
  accessLog: boolean
  configFile: string | undefined
  trustedProxies: BlockList
  trustedProxiesText: string
  /** Backend response-header and body idle deadline in ms (504 when exceeded). Default 30000. */
  upstreamTimeoutMs: number
  /** Backend connect deadline in ms (502 when exceeded). Default 5000. */
  upstreamConnectTimeoutMs: number
  /** Keep-alive connections per backend. Default 256. */
  upstreamConnections: number
  /** Slowloris guard: whole request head must arrive within this. Default 10000. */
  headersTimeoutMs: number
  /** Largest SSE event (or line) of an LLM stream the relay passes on (FAIRVISOR_LLM_MAX_EVENT_BYTES); a larger one ends the stream. Default 8m. */
  llmMaxEventBytes: number
  /** Longest wait an LLM reject answers 429 with Retry-After (FAIRVISOR_LLM_MAX_RETRY_AFTER, s); a longer one is 403, not retried. Default 60. */
  llmMaxRetryAfterS: number
  /** Tokens a graceful cut waits for a tool call's arguments to end (FAIRVISOR_LLM_TOOL_CALL_GRACE_TOKENS); past them an error event. Default 1024. */
  llmToolCallGraceTokens: number
  /** Add stream_options.include_usage to OpenAI-compatible streaming requests without stream_options (FAIRVISOR_LLM_STREAM_USAGE). Default true. */
  llmStreamUsage: boolean
  /** Whole request (head and body) must arrive within this; 0 disables. Default 300000. */
  requestTimeoutMs: number
  /** Idle keep-alive client connections are closed after this. Default 65000. */
  keepAliveTimeoutMs: number
  /** Largest accepted request head in bytes (431 above). Default 16384. */
  maxHeaderSize: number
  /** Graceful shutdown bound: in-flight requests get this long, then sockets are destroyed. Default 25000. */
  shutdownTimeoutMs: number
  /** Worker threads serving the listeners (FAIRVISOR_WORKERS); 1: one thread, as without workers. */
  workers: number
  /** Size in bytes of the counter table the workers share (FAIRVISOR_SHARED_TABLE_SIZE; default FAIRVISOR_SHARED_DICT_SIZE's value). */
  sharedTableBytes: number
  failPolicy: FailPolicy
  exposeReason: boolean
  debugSessionSecret: string | undefined
  /** When set, only bundles signed with this key (HMAC-SHA256, first line of the file) load. */
  bundleSigningKey: string | undefined
  /** Requests the process may hold for their debt (a token bucket's max_delay_ms) at once; past it they are rejected. Default 1024. */
  maxDelayed: number
}

function backendUrl(env: Env, mode: Mode): URL | undefined {
  const raw = optional(env, 'FAIRVISOR_BACKEND_URL')
  if (raw === undefined) {
    if (mode === 'reverse_proxy')
      throw new SettingError('FAIRVISOR_BACKEND_URL', 'is required in reverse_proxy mode; use an http(s) URL like http://127.0.0.1:3000')
    return undefined
  }
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new SettingError('FAIRVISOR_BACKEND_URL', `"${raw}" is not a URL; use an http(s) URL like http://127.0.0.1:3000`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new SettingError('FAIRVISOR_BACKEND_URL', `"${raw}" must use http or https`)
  if (url.pathname !== '/' || url.search)
    throw new SettingError('FAIRVISOR_BACKEND_URL', `"${raw}" must be an origin without a path or query (requests keep their own path)`)
  return url
}

/** Also read alone by `fairvisor test`, which needs no listener or backend settings. */
export function networkFiles(env: Env = process.env): NetworkFiles {
  return {
    asnMapFile: optional(env, 'FAIRVISOR_ASN_MAP_FILE'),
    geoipCountryFile: optional(env, 'FAIRVISOR_GEOIP_COUNTRY_FILE'),
    geoipAsnFile: optional(env, 'FAIRVISOR_GEOIP_ASN_FILE'),
    torExitListFile: optional(env, 'FAIRVISOR_TOR_EXIT_LIST_FILE'),
  }
}

/** The JWT key source (request/jwt-verify.ts); also read alone by `fairvisor test`, which verifies its samples' tokens alike. */
export function jwtSettings(env: Env = process.env): JwtVerifierSettings {
  return {
    jwtHmacSecret: optional(env, 'FAIRVISOR_JWT_HMAC_SECRET'),
    jwksFile: optional(env, 'FAIRVISOR_JWKS_FILE'),
    jwksUrl: optional(env, 'FAIRVISOR_JWKS_URL'),
  }
}

/** FAIRVISOR_MODE; also read alone by `fairvisor validate` and `fairvisor test` (what a bundle's rules can do depends on it). */
export function modeSetting(env: Env = process.env): Mode {
  return oneOf(env, 'FAIRVISOR_MODE', ['reverse_proxy', 'decision_service'] as const, 'reverse_proxy')
}

/** FAIRVISOR_MAX_DELAYED; also read alone by `fairvisor test`, which holds requests in debt as the gateway does. */
export function maxDelayedSetting(env: Env = process.env): number {
  return integer(env, 'FAIRVISOR_MAX_DELAYED', 1024, 0, 1_000_000)
}

/** How request paths are read and forwarded; also read alone by `fairvisor test`. */
export function pathSettings(env: Env = process.env): PathSettings {
  return {
    encodedSlashes: oneOf(env, 'FAIRVISOR_ENCODED_SLASHES', ['reject', 'decode', 'keep'] as const, 'reject'),
    forwardPath: oneOf(env, 'FAIRVISOR_FORWARD_PATH', ['normalised', 'original'] as const, 'normalised'),
  }
}

/** Shortest bundle signing key and debug session secret: 32 characters, as for the JWT HMAC secret (HMAC-SHA256 wants ≥ 256 bits). */
export const MIN_KEY_LENGTH = 32

/**
 * How this gateway loads bundles: under its signing key, and validated for
 * where its decisions are used (its mode, and a gRPC listener deciding on the
 * bundle too): a rule that needs the response, or a request's end, is refused
 * where it is not seen.
 */
export function bundleLoadOptions(s: Pick<Settings, 'bundleSigningKey' | 'mode' | 'grpcPort'>): LoadOptions {
  return { signingKey: s.bundleSigningKey, mode: s.mode, grpc: s.grpcPort !== undefined }
}

/** The settings; any FAIRVISOR_* variable that none of them read is refused (unknown-settings.ts). */
export function loadSettings(env: Env = process.env): Readonly<Settings> {
  const read = new Set<string>()
  const settings = parseSettings(recording(env, read))
  refuseUnknown(env, read)
  return settings
}

function parseSettings(env: Env): Readonly<Settings> {
  const mode = modeSetting(env)
  const adminPortRaw = optional(env, 'FAIRVISOR_ADMIN_PORT')
  const trustedProxiesText = env.FAIRVISOR_TRUSTED_PROXIES ?? ''
  const store = storeSettings(env)
  // The gRPC listener's defaults follow the HTTP listener's.
  const http = {
    headersTimeoutMs: integer(env, 'FAIRVISOR_HEADERS_TIMEOUT_MS', 10000, 1, 600_000),
    keepAliveTimeoutMs: integer(env, 'FAIRVISOR_KEEPALIVE_TIMEOUT_MS', 65000, 1, 3_600_000),
  }
  const adminPort = adminPortRaw === undefined ? undefined : integer(env, 'FAIRVISOR_ADMIN_PORT', 0, 0, 65535)
  const settings: Settings = {
    mode,
    backendUrl: backendUrl(env, mode),
    host: optional(env, 'FAIRVISOR_HOST') ?? '0.0.0.0',
    port: integer(env, 'FAIRVISOR_PORT', 8080, 0, 65535),
    adminPort,
    ...adminSettings(env, adminPort),
    logLevel: oneOf(env, 'FAIRVISOR_LOG_LEVEL', ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const, 'info'),
    accessLog: bool(env, 'FAIRVISOR_ACCESS_LOG', false),
    configFile: optional(env, 'FAIRVISOR_CONFIG_FILE'),
    trustedProxies: parseTrustedProxies(trustedProxiesText),
    trustedProxiesText,
    upstreamTimeoutMs: integer(env, 'FAIRVISOR_UPSTREAM_TIMEOUT_MS', 30000, 1, 3_600_000),
    upstreamConnectTimeoutMs: integer(env, 'FAIRVISOR_UPSTREAM_CONNECT_TIMEOUT_MS', 5000, 1, 600_000),
    upstreamConnections: integer(env, 'FAIRVISOR_UPSTREAM_CONNECTIONS', 256, 1, 65535),
    llmMaxEventBytes: size(env, 'FAIRVISOR_LLM_MAX_EVENT_BYTES', '8m'),
    llmMaxRetryAfterS: integer(env, 'FAIRVISOR_LLM_MAX_RETRY_AFTER', 60, 0, 86_400),
    llmStreamUsage: bool(env, 'FAIRVISOR_LLM_STREAM_USAGE', true),
    llmToolCallGraceTokens: integer(env, 'FAIRVISOR_LLM_TOOL_CALL_GRACE_TOKENS', 1024, 0, 1_000_000),
    headersTimeoutMs: http.headersTimeoutMs,
    requestTimeoutMs: integer(env, 'FAIRVISOR_REQUEST_TIMEOUT_MS', 300000, 0, 86_400_000),
    keepAliveTimeoutMs: http.keepAliveTimeoutMs,
    maxHeaderSize: integer(env, 'FAIRVISOR_MAX_HEADER_SIZE', 16384, 1024, 1024 * 1024),
    shutdownTimeoutMs: integer(env, 'FAIRVISOR_SHUTDOWN_TIMEOUT_MS', 25000, 0, 600_000),
    ...store,
    workers: integer(env, 'FAIRVISOR_WORKERS', defaultWorkers(), 1, 256),
    sharedTableBytes: size(env, 'FAIRVISOR_SHARED_TABLE_SIZE', optional(env, 'FAIRVISOR_SHARED_DICT_SIZE') ?? '128m'),
    failPolicy: oneOf(env, 'FAIRVISOR_FAIL_POLICY', ['open', 'closed'] as const, 'open'),
    exposeReason: bool(env, 'FAIRVISOR_EXPOSE_REASON', true),
    ...pathSettings(env),
    debugSessionSecret: secret(env, 'FAIRVISOR_DEBUG_SESSION_SECRET', MIN_KEY_LENGTH),
    ...jwtSettings(env),
    ...networkFiles(env),
    bundleSigningKey: secret(env, 'FAIRVISOR_BUNDLE_SIGNING_KEY', MIN_KEY_LENGTH),
    maxDelayed: maxDelayedSetting(env),
    ...grpcSettings(env, http),
    ...traceSettings(env),
  }
  if (settings.headersTimeoutMs > settings.requestTimeoutMs && settings.requestTimeoutMs !== 0) {
    throw new SettingError(
      'FAIRVISOR_HEADERS_TIMEOUT_MS',
      `${settings.headersTimeoutMs} must not exceed FAIRVISOR_REQUEST_TIMEOUT_MS (${settings.requestTimeoutMs})`,
    )
  }
  distinctPorts(settings)
  return Object.freeze(settings)
}

/**
 * `fairvisor --help`: every command with its flags, and every setting. The
 * settings list is checked against src/settings.ts by test/e2e/cli-usage.test.ts,
 * so a new variable cannot be left out of it. The init templates are listed
 * from the templates themselves, so a new one cannot be left out either.
 */
import { TEMPLATES } from './init-templates.js'

const TEMPLATE_NAMES = Object.keys(TEMPLATES).join('|')

const COMMANDS = `usage: fairvisor <command> [flags]

commands:
  serve                      run the gateway (the default when no command is given); takes no
                             flags: it is configured by the environment (see settings below)
  validate <file|->...       load bundles exactly as the gateway would; print every error with its
                             file and JSON pointer, or a summary. Exit 0 ok, 1 an error (a reload
                             would refuse the bundle whole), 2 bad command line
      --format text|json     output format (default text; json: one object per file)
      --key-file <file>      the files must be signed under the key in this file
      --mode <mode>          reverse_proxy or decision_service (default FAIRVISOR_MODE, else reverse_proxy)
      --grpc                 the gateway also serves gRPC (default: FAIRVISOR_GRPC_PORT set)
  test <bundle> --requests <file.jsonl|->
                             run sample requests through the real engine and an in-process store;
                             bearer tokens verified with the gateway's JWT settings (FAIRVISOR_JWT_*,
                             FAIRVISOR_JWKS_*), else reported as claims not verified
      --requests <file>      one JSON request per line (required)
      --format table|json    output format (default table)
      --start <time>         start time, e.g. 2026-01-01T00:00:00Z (default: now)
  test <bundle> --access-log <file|->
                             replay an access log through the engine offline on the log's own
                             clock (as fast as it reads; no pacing) and print what the bundle
                             would have rejected: per policy/rule/reason, the top keys, the first
                             and last request; rules skipped for a missing limit key (a combined
                             log has no Authorization, API key or other header); malformed lines
                             counted. Exit 0 when replayed, 1 bad bundle, unreadable file or no
                             readable request, 2 bad command line
      --access-log <file>    the log, read line by line (- standard input; *.gz decompressed)
      --format nginx-combined|json-lines
                             nginx's combined format (default), or one JSON object per line:
                             {"time","ip","method","path","host","headers","status"}
      --host <name>          Host of the lines that log none (default localhost)
      --top <n>              keys shown per policy/rule/reason (default 10)
      --json                 one JSON object instead of text
  init                       write a starter bundle (to standard output by default)
      --template ${TEMPLATE_NAMES}
                             which starter (default api)
      --out <file>           write to this file instead
      --force                overwrite an existing --out file
  sign --key-file <file> <bundle.json|->
                             write the signed form of a bundle (first line: base64 HMAC-SHA256 of
                             the rest) for FAIRVISOR_BUNDLE_SIGNING_KEY; the key file holds the
                             same string as that variable (one trailing newline is ignored)
      --key-file <file>      the signing key (required, at least 32 characters)
      --out <file>           write to this file instead of standard output
  status                     a running gateway through its admin listener: readiness, then (with the
                             admin token) the bundle in force, decisions and rejects per second
                             (two reads a second apart) and the keys rejected most. Exit 0 ready,
                             1 not ready, 2 bad command line, 3 admin listener unreachable or token refused
      --admin-url <url>      the admin listener (default http://127.0.0.1:$FAIRVISOR_ADMIN_PORT)
      --token <token>        the admin token (default FAIRVISOR_ADMIN_TOKEN)
      --top <n>              keys to list (default 10)
  version, --version, -v     print the version
  help, --help, -h           print this help

An unknown command or flag is an error (exit 2).
`

/** [variable, default, meaning]; docs/configuration.md says more about each. */
const SETTINGS: readonly (readonly [string, string, string])[] = [
  ['FAIRVISOR_MODE', 'reverse_proxy', 'reverse_proxy or decision_service'],
  ['FAIRVISOR_BACKEND_URL', '(required in reverse_proxy)', 'backend origin, http(s)://host:port'],
  ['FAIRVISOR_HOST', '0.0.0.0', 'listen address'],
  ['FAIRVISOR_PORT', '8080', 'listen port; 0 picks a free one'],
  [
    'FAIRVISOR_ADMIN_PORT',
    'unset',
    '/livez /readyz /metrics (and the admin API, status page) on this port instead of the public one, in both modes (recommended)',
  ],
  [
    'FAIRVISOR_ADMIN_TOKEN',
    'unset',
    'bearer token of the admin API /v1/admin/* (at least 16 characters; needs FAIRVISOR_ADMIN_PORT); unset: off',
  ],
  ['FAIRVISOR_ADMIN_TOP_KEYS', '1000', 'keys the admin API counts per thread for its top rejected keys (10 to 100000)'],
  ['FAIRVISOR_ADMIN_TOP_WINDOW_S', '300', 'seconds of rejects the top rejected keys cover at most (at least half of it; 10 to 86400)'],
  ['FAIRVISOR_CONFIG_FILE', 'unset', 'bundle file, or a directory holding it; unset or missing: every request is 503'],
  ['FAIRVISOR_BUNDLE_SIGNING_KEY', 'unset', 'accept only bundles signed with this key (at least 32 characters)'],
  ['FAIRVISOR_LOG_LEVEL', 'info', 'trace debug info warn error fatal silent'],
  ['FAIRVISOR_ACCESS_LOG', 'false', 'one info line per request'],
  [
    'FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT',
    'unset',
    'traces on: OTLP/HTTP endpoint spans go to (v1/traces appended); else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT',
  ],
  ['OTEL_SERVICE_NAME', 'fairvisor', "the spans' service.name"],
  ['OTEL_TRACES_SAMPLER', 'parentbased_always_on', 'always_on, always_off or traceidratio, each also as parentbased_<name>'],
  ['OTEL_TRACES_SAMPLER_ARG', '1', 'the fraction of traces the traceidratio samplers keep, 0 to 1'],
  ['FAIRVISOR_TRUSTED_PROXIES', 'empty', 'IPs/CIDRs whose X-Forwarded-For is believed; a list covering every address is refused'],
  ['FAIRVISOR_UPSTREAM_TIMEOUT_MS', '30000', 'backend response deadline (504)'],
  ['FAIRVISOR_UPSTREAM_CONNECT_TIMEOUT_MS', '5000', 'backend connect deadline (504)'],
  ['FAIRVISOR_UPSTREAM_CONNECTIONS', '256', 'keep-alive connections to the backend'],
  [
    'FAIRVISOR_LLM_MAX_EVENT_BYTES',
    '8m',
    'largest SSE event of an LLM stream passed on (k, m, g); a larger one ends the stream with an error event',
  ],
  [
    'FAIRVISOR_LLM_MAX_RETRY_AFTER',
    '60',
    'longest wait (s) an LLM reject answers 429 with Retry-After; a longer one is a 403 that no client retries',
  ],
  [
    'FAIRVISOR_LLM_STREAM_USAGE',
    'true',
    'ask OpenAI-compatible streams without stream_options for their usage (the added usage chunk is not passed on)',
  ],
  [
    'FAIRVISOR_LLM_TOOL_CALL_GRACE_TOKENS',
    '1024',
    'tokens a graceful cut waits for an open tool call to end; past them the stream ends with an error event (0: at once)',
  ],
  ['FAIRVISOR_HEADERS_TIMEOUT_MS', '10000', 'request head deadline (408)'],
  ['FAIRVISOR_REQUEST_TIMEOUT_MS', '300000', 'whole request deadline; 0 disables'],
  ['FAIRVISOR_KEEPALIVE_TIMEOUT_MS', '65000', 'idle client connections close after this'],
  ['FAIRVISOR_MAX_HEADER_SIZE', '16384', 'largest request head in bytes (431)'],
  ['FAIRVISOR_SHUTDOWN_TIMEOUT_MS', '25000', 'drain time on SIGTERM/SIGINT'],
  ['FAIRVISOR_MAX_DELAYED', '1024', 'requests the process holds at once for their turn (max_delay_ms); past it they are rejected'],
  ['FAIRVISOR_STORE', 'memory', 'memory, or a redis://, rediss://, redis+cluster://, unix:// or postgres:// URL'],
  ['FAIRVISOR_SHARED_DICT_SIZE', '128m', 'memory-store bound'],
  ['FAIRVISOR_WORKERS', 'usable cores', 'worker threads serving the port over one shared counter table; 1: a single thread'],
  [
    'FAIRVISOR_SHARED_TABLE_SIZE',
    'as FAIRVISOR_SHARED_DICT_SIZE',
    'size of the counter table the workers share (memory store, FAIRVISOR_WORKERS > 1)',
  ],
  ['FAIRVISOR_LEASE_TABLE_KEYS', '8192', 'hot keys one process can hold token leases for at once (remote stores; 16 to 1048576)'],
  ['FAIRVISOR_FAIL_POLICY', 'open', 'store failure: open (allow) or closed (503)'],
  ['FAIRVISOR_STORE_TIMEOUT_MS', '50', 'deadline of each Redis or PostgreSQL call'],
  ['FAIRVISOR_REDIS_TIMEOUT_MS', '50', 'older name of FAIRVISOR_STORE_TIMEOUT_MS (which wins when both are set)'],
  ['FAIRVISOR_PG_POOL_SIZE', '4', 'PostgreSQL connections'],
  ['FAIRVISOR_PG_TABLE_PREFIX', 'fairvisor_', 'name prefix of the PostgreSQL table and functions'],
  ['FAIRVISOR_PG_UNLOGGED', 'auto', 'create the PostgreSQL table UNLOGGED (faster; emptied after a crash); auto: not on YugabyteDB'],
  ['FAIRVISOR_EXPOSE_REASON', 'true', 'send X-Fairvisor-Reason on rejects'],
  ['FAIRVISOR_ENCODED_SLASHES', 'reject', '%2F or %5C in a path: reject (400), decode (a separator) or keep (part of the segment)'],
  ['FAIRVISOR_FORWARD_PATH', 'normalised', 'path sent to the backend: normalised (the one matched) or original (as received)'],
  ['FAIRVISOR_DEBUG_SESSION_SECRET', 'unset', 'enables debug sessions (at least 32 characters)'],
  ['FAIRVISOR_JWT_HMAC_SECRET', 'unset', 'verify bearer tokens with this HMAC secret'],
  ['FAIRVISOR_JWKS_FILE', 'unset', 'verify bearer tokens against this JWKS file'],
  ['FAIRVISOR_JWKS_URL', 'unset', 'verify bearer tokens against this JWKS URL'],
  ['FAIRVISOR_ASN_MAP_FILE', 'unset', 'ASN to network type map for ip:type'],
  ['FAIRVISOR_GEOIP_COUNTRY_FILE', 'unset', 'MaxMind-format country database for ip:country when X-Country-Code is absent'],
  ['FAIRVISOR_GEOIP_ASN_FILE', 'unset', 'MaxMind-format ASN database for ip:asn (and ip:type) when X-ASN is absent'],
  ['FAIRVISOR_GRPC_PORT', 'unset', 'gRPC listener for Envoy (ext_authz v3, Rate Limit Service v3, health); 0 picks a free one'],
  ['FAIRVISOR_GRPC_TLS_CERT_FILE', 'unset', 'PEM certificate chain: the gRPC listener speaks TLS (with FAIRVISOR_GRPC_TLS_KEY_FILE)'],
  ['FAIRVISOR_GRPC_TLS_KEY_FILE', 'unset', 'PEM private key of FAIRVISOR_GRPC_TLS_CERT_FILE'],
  ['FAIRVISOR_GRPC_TLS_CLIENT_CA_FILE', 'unset', 'PEM CA bundle: gRPC clients must present a certificate that chains to it (mTLS)'],
  ['FAIRVISOR_GRPC_MAX_CONCURRENT_STREAMS', '1000', 'HTTP/2 streams one gRPC connection may have open at once'],
  ['FAIRVISOR_GRPC_MAX_BUFFERED_BYTES', '64m', 'bytes unfinished gRPC requests may hold together (k, m, g); past it RESOURCE_EXHAUSTED'],
  [
    'FAIRVISOR_GRPC_IDLE_TIMEOUT_MS',
    'as FAIRVISOR_KEEPALIVE_TIMEOUT_MS',
    'a gRPC connection without an open stream is closed (GOAWAY) after this',
  ],
  [
    'FAIRVISOR_GRPC_STREAM_TIMEOUT_MS',
    'as FAIRVISOR_HEADERS_TIMEOUT_MS',
    'a gRPC call unanswered after this (or its shorter grpc-timeout) is DEADLINE_EXCEEDED',
  ],
  ['FAIRVISOR_RLS_CONFIG', 'unset', 'envoyproxy/ratelimit YAML configuration for ShouldRateLimit: a file or a directory of .yaml'],
  ['FAIRVISOR_RLS_MERGE_DOMAIN_CONFIG', 'false', 'one RLS domain split over several files is merged (or MERGE_DOMAIN_CONFIG)'],
  ['FAIRVISOR_RLS_RESPONSE_HEADERS', 'false', 'add RateLimit-Limit/-Remaining/-Reset to ShouldRateLimit answers'],
  [
    'FAIRVISOR_RLS_STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT',
    'false',
    'a rejected ShouldRateLimit call charges only its descriptors going over (default: every one); also read as STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT',
  ],
  [
    'FAIRVISOR_RLS_STORE_FAILURE',
    'error',
    'store down: ShouldRateLimit answers UNKNOWN (error, as envoyproxy/ratelimit) or the FAIRVISOR_FAIL_POLICY statuses (policy)',
  ],
  ['FAIRVISOR_RLS_SHADOW_MODE', 'false', 'no ShouldRateLimit call is answered OVER_LIMIT; limits still counted (or SHADOW_MODE)'],
  ['FAIRVISOR_RLS_QUOTA_MODE', 'false', 'every RLS descriptor in quota_mode: OVER_LIMIT only when all are over (or QUOTA_MODE)'],
  [
    'FAIRVISOR_RLS_RESPONSE_DYNAMIC_METADATA',
    'false',
    "ShouldRateLimit answers carry dynamic_metadata: the request and the passed limits' metadata (or RESPONSE_DYNAMIC_METADATA)",
  ],
  ['FAIRVISOR_RLS_MAX_DESCRIPTORS', '256', 'descriptors one ShouldRateLimit call may carry; past it RESOURCE_EXHAUSTED'],
  ['FAIRVISOR_RLS_NEAR_LIMIT_RATIO', '0.8', 'near_limit statistic from this fraction of each RLS limit (or NEAR_LIMIT_RATIO)'],
  ['FAIRVISOR_RLS_USE_STATSD', 'false', "send envoyproxy/ratelimit's statistics to statsd over UDP (or USE_STATSD)"],
  ['FAIRVISOR_RLS_STATSD_HOST', 'localhost', 'the statsd host (or STATSD_HOST)'],
  ['FAIRVISOR_RLS_STATSD_PORT', '8125', 'the statsd UDP port (or STATSD_PORT)'],
  ['FAIRVISOR_RLS_STATS_FLUSH_INTERVAL_MS', '10000', 'ms between statsd flushes (or STATS_FLUSH_INTERVAL, a duration such as 10s)'],
  ['FAIRVISOR_RLS_STATS_MAX_KEYS', '1000', 'RLS statistics keys built from request values, per thread; past it <domain>._overflow'],
  ['FAIRVISOR_TOR_EXIT_LIST_FILE', 'unset', 'Tor exit addresses, one per line, for ip:tor when X-Tor-Exit is absent'],
]

export function helpText(): string {
  const width = Math.max(...SETTINGS.map(([n]) => n.length))
  const lines = SETTINGS.map(([name, dflt, meaning]) => `  ${name.padEnd(width)}  ${meaning} (default: ${dflt})`)
  return `${COMMANDS}\nsettings (environment variables, read by serve; any other FAIRVISOR_* variable is an error, exit 2):\n${lines.join('\n')}\n`
}

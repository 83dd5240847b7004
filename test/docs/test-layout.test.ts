/**
 * Tests mirror the code, so the test of a file is found from its path:
 * - the unit test of `src/<folder>/<file>.ts` is `test/unit/<folder>/<file>.test.ts`;
 * - a src file without one is on COVERED_ELSEWHERE below, naming the test that
 *   does cover it (end to end, the store contract, a property test, or the
 *   unit test of the file it serves) and, in a comment, what that test drives;
 * - the list only shrinks: an entry whose file is gone, or that now has its
 *   own unit test, fails until it is removed;
 * - test/unit/ holds only such mirrors: a unit test of no src file, or a
 *   helper, fails (shared helpers live in test/helpers/).
 * The other folders are by kind of test: test/e2e/ by feature, test/store/ the
 * contract every store meets (its fixtures contract.ts, contract-kinds.ts and
 * contract-concurrency.ts stay beside it: only that suite imports them), test/property/ the property
 * tests, test/deploy/ and test/docs/ the checks of files shipped beside the code.
 * Files stay small and named for what they own: a src file has at most 250 lines.
 */
import assert from 'node:assert/strict'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join, relative } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)],
  )
}
/** src files with code (declaration files have nothing to test), relative to src/. */
const SRC = files('src')
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
  .map((f) => relative('src', f))
const unitTestOf = (src: string): string => join('test/unit', src.replace(/\.ts$/, '.test.ts'))

/** src file (relative to src/) → the test that covers it; the comment says what that test drives. */
const COVERED_ELSEWHERE: Record<string, string> = {
  'algorithms/algorithm.ts': 'test/property/stores-differential.test.ts', // the Limit contract, run for every kind on every store
  'algorithms/circuit-breaker.ts': 'test/unit/algorithms/cost-budget.test.ts', // circuit_breaker opens, rejects, resets
  'algorithms/kinds/concurrency/postgres.ts': 'test/store/postgres.test.ts', // the PL/pgSQL twin: the store contract's concurrency cases
  'algorithms/kinds/concurrency/redis.ts': 'test/store/redis.test.ts', // the Lua twin: the store contract's concurrency cases
  'algorithms/kinds/index.ts': 'test/property/stores-differential.test.ts', // every kind of the table on every store
  'algorithms/kinds/rate-meter/kind.ts': 'test/property/expiry-lossless.test.ts', // the meter's expiry loses no count
  'algorithms/kinds/rate-meter/postgres.ts': 'test/property/stores-differential.test.ts', // the PL/pgSQL twin against kind.ts
  'algorithms/kinds/rate-meter/redis.ts': 'test/property/stores-differential.test.ts', // the Lua twin against kind.ts
  'algorithms/kinds/sliding-window/postgres.ts': 'test/property/kind-twins.test.ts', // the PL/pgSQL twin against kind.ts on any instant
  'algorithms/kinds/sliding-window/redis.ts': 'test/property/kind-twins.test.ts', // the Lua twin against kind.ts on any instant
  'algorithms/kinds/token-bucket/postgres.ts': 'test/property/stores-differential.test.ts', // the PL/pgSQL twin against kind.ts
  'algorithms/kinds/token-bucket/redis.ts': 'test/property/stores-differential.test.ts', // the Lua twin against kind.ts
  'algorithms/kinds/twins.ts': 'test/unit/algorithms/index.test.ts', // a made-up kind's twins assembled into both stores (types only)
  'algorithms/kinds/window-counter/postgres.ts': 'test/property/kind-twins.test.ts', // the PL/pgSQL twin against kind.ts, calendar months included
  'algorithms/kinds/window-counter/redis.ts': 'test/property/kind-twins.test.ts', // the Lua twin against kind.ts, calendar months included
  'algorithms/llm-messages.ts': 'test/unit/decision/response.test.ts', // the LLM reject bodies in each API's shape
  'algorithms/llm.ts': 'test/unit/llm/request-body.test.ts', // token_bucket_llm reservation and settlement bounds
  'algorithms/loop-detection.ts': 'test/unit/algorithms/cost-budget.test.ts', // loop_detection reject, warn, throttle
  'algorithms/rls-limit.ts': 'test/unit/grpc/rls-compile.test.ts', // RLS limits compiled into engine limits
  'algorithms/token-bucket.ts': 'test/unit/bundle/validate.test.ts', // token_bucket's config checks (burst, lease)
  'bundle/breaker-reach.ts': 'test/e2e/breaker-example.test.ts', // the warning for a breaker one request can open
  'bundle/compile.ts': 'test/property/bundle.test.ts', // any valid bundle compiles
  'bundle/hosts.ts': 'test/unit/bundle/route-index.test.ts', // host selectors through the route index
  'bundle/schema.ts': 'test/unit/bundle/validate.test.ts', // each schema error's sentence
  'bundle/signature.ts': 'test/unit/bundle/source.test.ts', // bundle signatures checked before a bundle is used
  'bundle/types.ts': 'test/unit/bundle/load.test.ts', // the loaded bundle's shape (types only)
  'bundle/validate-policy.ts': 'test/unit/bundle/validate.test.ts', // a bad policy dropped alone, with its sentence
  'bundle/watch.ts': 'test/e2e/reload.test.ts', // a changed bundle file is reloaded
  'cli.ts': 'test/e2e/cli.test.ts', // the fairvisor command and its subcommands
  'clock.ts': 'test/e2e/ratelimit.test.ts', // the wall clock of the running gateway
  'commands/args.ts': 'test/e2e/cli-usage.test.ts', // usage errors and options
  'commands/help.ts': 'test/e2e/cli-usage.test.ts', // --help and its settings table
  'commands/init-templates.ts': 'test/e2e/cli-usage.test.ts', // the files fairvisor init writes
  'commands/init.ts': 'test/e2e/cli.test.ts', // fairvisor init
  'commands/sign.ts': 'test/e2e/cli-usage.test.ts', // fairvisor sign
  'commands/status.ts': 'test/e2e/admin-api.test.ts', // fairvisor status against a real gateway: ready, not ready, unreachable
  'commands/test-engine.ts': 'test/e2e/cli.test.ts', // the offline gateway fairvisor test runs its requests through
  'commands/test-llm.ts': 'test/e2e/cli-llm.test.ts', // fairvisor test on LLM requests
  'commands/test-replay-report.ts': 'test/e2e/cli-replay.test.ts', // the rejects of a replayed log, counted and printed
  'commands/test-replay.ts': 'test/e2e/cli-replay.test.ts', // fairvisor test --access-log
  'commands/test-report.ts': 'test/e2e/cli.test.ts', // fairvisor test's report
  'commands/test-response.ts': 'test/e2e/cli-delay-status.test.ts', // requests held for their tokens and statuses settled in fairvisor test
  'commands/test-samples.ts': 'test/e2e/cli.test.ts', // fairvisor test's request samples
  'commands/test-slots.ts': 'test/e2e/cli-concurrency.test.ts', // fairvisor test holding slots for a line's `hold`
  'commands/test.ts': 'test/e2e/cli.test.ts', // fairvisor test
  'commands/validate.ts': 'test/e2e/cli.test.ts', // fairvisor validate
  'decision/debug-headers.ts': 'test/e2e/debug-session.test.ts', // debug headers for a session holder
  'decision/decide.ts': 'test/unit/grpc/rls-service.test.ts', // decide through the engine, fail policy, observer
  'engine/decision.ts': 'test/unit/engine/evaluate.test.ts', // the decision the engine returns
  'engine/fingerprint.ts': 'test/unit/algorithms/cost-budget.test.ts', // loop_detection's identical-request fingerprint
  'engine/kill-switch.ts': 'test/e2e/decision-overrides.test.ts', // kill switches through the decision API
  'engine/llm-plan.ts': 'test/unit/llm/estimate.test.ts', // token_bucket_llm pre-checks in the documented order
  'engine/log-key.ts': 'test/unit/llm/request-body.test.ts', // credentials hashed in logged keys
  'engine/plan.ts': 'test/unit/engine/evaluate.test.ts', // the checks planned for a request
  'grpc/ext-authz.ts': 'test/e2e/grpc-authz.test.ts', // Envoy ext_authz Check
  'grpc/metrics.ts': 'test/e2e/grpc-authz.test.ts', // the gRPC metrics
  'grpc/protos.ts': 'test/e2e/grpc-wire.test.ts', // the messages on the wire
  'grpc/rls-bundle.ts': 'test/e2e/grpc-rls.test.ts', // the RLS configuration loaded and reloaded
  'grpc/rls-source.ts': 'test/e2e/grpc-rls.test.ts', // the RLS configuration file read and watched
  'grpc/server.ts': 'test/e2e/grpc-authz.test.ts', // the gRPC listener
  'grpc/status.ts': 'test/unit/grpc/rls-cap.test.ts', // gRPC status codes of a refusal
  'grpc/unary-server.ts': 'test/e2e/grpc-wire.test.ts', // unary calls over HTTP/2
  'grpc/wire.ts': 'test/e2e/grpc-wire.test.ts', // gRPC framing
  'http/admin.ts': 'test/e2e/lifecycle.test.ts', // /livez /readyz /metrics
  'http/debug-session.ts': 'test/e2e/debug-session.test.ts', // debug sessions
  'http/decision-api.ts': 'test/e2e/decision.test.ts', // /v1/decision
  'http/direct-forwarding.ts': 'test/e2e/proxy.test.ts', // bodiless requests on the proxy's own pool: 502/504, client abort, streaming
  'http/forward-headers.ts': 'test/e2e/proxy.test.ts', // hop-by-hop and X-Forwarded-* rewriting
  'http/forwarding.ts': 'test/e2e/proxy.test.ts', // requests forwarded upstream
  'http/health.ts': 'test/e2e/lifecycle.test.ts', // readiness
  'http/lane-conn.ts': 'test/unit/http/lane.test.ts', // one lane connection: its requests, pipelining, hand-over, timeouts, errors
  'http/llm-body.ts': 'test/e2e/llm.test.ts', // the body read for LLM rules
  'http/llm-relay.ts': 'test/e2e/llm.test.ts', // LLM responses relayed and metered
  'http/proxy.ts': 'test/e2e/proxy.test.ts', // the reverse proxy
  'http/respond.ts': 'test/e2e/ratelimit.test.ts', // rejects and throttles written to the client
  'http/routes.ts': 'test/e2e/decision.test.ts', // routes per mode
  'http/server.ts': 'test/e2e/lifecycle.test.ts', // listeners started and drained
  'llm/dialects/bedrock.ts': 'test/unit/llm/dialects/provider-facts.test.ts', // Bedrock's closing and error messages
  'llm/dialects/chat.ts': 'test/unit/llm/dialects/index.test.ts', // the chat completions API
  'llm/dialects/event-parts.ts': 'test/unit/llm/dialects/index.test.ts', // stream event parts of each API
  'llm/dialects/gemini.ts': 'test/unit/llm/dialects/provider-facts.test.ts', // Gemini's closing chunk and errors, SSE and JSON array
  'llm/dialects/messages.ts': 'test/unit/llm/dialects/index.test.ts', // the messages API
  'llm/dialects/ollama.ts': 'test/unit/llm/dialects/provider-facts.test.ts', // Ollama's done line and errors
  'llm/dialects/responses.ts': 'test/unit/llm/dialects/index.test.ts', // the responses API
  'llm/dialects/stream-facts.ts': 'test/unit/llm/dialects/index.test.ts', // what a stream event tells
  'llm/exchange.ts': 'test/unit/llm/sse-meter.test.ts', // a stream ended with the API's error event
  'llm/framings/eventstream.ts': 'test/unit/llm/framings/index.test.ts', // Bedrock event-stream messages, split anywhere, checksums
  'llm/framings/framing.ts': 'test/unit/llm/framings/index.test.ts', // the framing contract (types only)
  'llm/framings/json-array.ts': 'test/unit/llm/framings/index.test.ts', // Gemini's JSON array elements, split anywhere
  'llm/framings/ndjson.ts': 'test/unit/llm/framings/index.test.ts', // Ollama's NDJSON lines, split anywhere
  'llm/prompt-parts.ts': 'test/unit/llm/request-body.test.ts', // the billed fields of the body
  'llm/providers/bedrock.ts': 'test/unit/llm/providers/index.test.ts', // Bedrock's usage, deltas and maxTokens
  'llm/providers/gemini.ts': 'test/unit/llm/providers/index.test.ts', // Gemini's usageMetadata, parts and maxOutputTokens
  'llm/providers/ollama.ts': 'test/unit/llm/providers/index.test.ts', // Ollama's counts, chunks and num_predict
  'llm/providers/paths.ts': 'test/unit/llm/providers/index.test.ts', // which provider a path names
  'llm/settle-cap.ts': 'test/unit/llm/request-body.test.ts', // an overrun charged at most the burst
  'llm/sse-events.ts': 'test/unit/llm/sse-meter.test.ts', // SSE framing across chunk splits
  'llm/usage.ts': 'test/unit/llm/estimate.test.ts', // usage parsed from each API's answer
  'main.ts': 'test/e2e/lifecycle.test.ts', // the gateway started, reloaded and stopped
  'observe/engine-observer.ts': 'test/e2e/metrics.test.ts', // decisions counted
  'observe/give-back.ts': 'test/e2e/status-count.test.ts', // charges a response's status does not keep given back, counted
  'observe/hot-metrics.ts': 'test/e2e/metrics.test.ts', // per-request counters
  'observe/live-gauges.ts': 'test/e2e/protection-visible.test.ts', // the store's fill at scrape time
  'observe/llm-observer.ts': 'test/e2e/llm-sdk.test.ts', // tokens consumed per settlement
  'observe/log-throttle.ts': 'test/e2e/protection-visible.test.ts', // a flood logged a few lines, not one per request
  'observe/logger.ts': 'test/e2e/protection-visible.test.ts', // the JSON log lines and levels
  'observe/metrics.ts': 'test/e2e/metrics.test.ts', // /metrics
  'observe/reload-log.ts': 'test/e2e/reload.test.ts', // each reload logged and counted
  'observe/rls-stats-sinks.ts': 'test/e2e/grpc-rls-stats.test.ts', // each thread's RLS statistics on /metrics and to statsd
  'reload-signal.ts': 'test/e2e/reload.test.ts', // SIGHUP reloads
  'request/api-key.ts': 'test/e2e/credential-keys.test.ts', // llm:api_key read as the API bills
  'request/client-ip.ts': 'test/unit/request/view.test.ts', // the client address behind trusted proxies
  'request/descriptors.ts': 'test/property/limit-keys.test.ts', // limit keys from any request
  'request/geoip.ts': 'test/unit/request/network-data.test.ts', // the country database
  'request/jwt.ts': 'test/unit/request/view.test.ts', // JWT claims read
  'request/normalise.ts': 'test/property/request.test.ts', // paths and hosts normalised
  'request/raw-headers.ts': 'test/unit/request/view.test.ts', // headers read as sent
  'request/tor-exits.ts': 'test/unit/request/network-data.test.ts', // the Tor exit list
  'request/trusted-proxies.ts': 'test/e2e/client-ip.test.ts', // FAIRVISOR_TRUSTED_PROXIES
  'runtime/config-source.ts': 'test/e2e/reload.test.ts', // the bundle read, watched and reloaded in one thread
  'runtime/one-thread.ts': 'test/e2e/startup-refusals.test.ts', // one thread listening on its named sockets; bind errors
  'runtime/runtime.ts': 'test/e2e/lifecycle.test.ts', // the listening line and shutdown of either runtime
  'runtime/worker-thread.ts': 'test/e2e/workers.test.ts', // a worker thread listening where the supervisor says
  'settings-env.ts': 'test/unit/settings.test.ts', // bad values refused, naming the variable
  'settings-grpc.ts': 'test/e2e/grpc-tls.test.ts', // the gRPC port, TLS files and RLS configuration
  'settings-store.ts': 'test/unit/store/config.test.ts', // store settings from FAIRVISOR_STORE and its companions
  'store/batcher.ts': 'test/store/redis-behaviour.test.ts', // a batch's calls fail at their own deadline
  'store/factory.ts': 'test/e2e/store-startup.test.ts', // the store built from FAIRVISOR_STORE
  'store/in-process.ts': 'test/store/memory.test.ts', // the store contract on the in-process stores
  'store/lease-waiters.ts': 'test/e2e/lease-worker-kill.test.ts', // requests waiting for a fetch, woken when its worker dies
  'store/memory/counters.ts': 'test/store/memory.test.ts', // the store contract on the memory store
  'store/memory/store.ts': 'test/store/memory.test.ts', // the store contract on the memory store
  'store/open.ts': 'test/e2e/store-startup.test.ts', // the store opened, refused or not reachable at start
  'store/postgres/cleanup.ts': 'test/store/postgres-distributed.test.ts', // clean-up failures counted and logged, rows deleted once it works
  'store/postgres/codec.ts': 'test/store/postgres.test.ts', // the store contract on PostgreSQL
  'store/postgres/conn.ts': 'test/store/postgres-behaviour.test.ts', // one statement per connection; no server: calls fail at once
  'store/postgres/schema.ts': 'test/store/postgres-distributed.test.ts', // set up once per version, with and without the advisory lock
  'store/postgres/sql.ts': 'test/store/postgres.test.ts', // the store contract on PostgreSQL
  'store/postgres/store.ts': 'test/store/postgres.test.ts', // the store contract on PostgreSQL
  'store/redis/call.ts': 'test/store/redis-behaviour.test.ts', // one EVALSHA per request, batched, NOSCRIPT handled
  'store/redis/cluster.ts': 'test/store/redis-cluster-slots.test.ts', // keys routed to their slot's node
  'store/redis/codec.ts': 'test/unit/store/redis/resp-connection.test.ts', // RESP encoding
  'store/redis/common.ts': 'test/store/redis-behaviour.test.ts', // connection state of a dead, hung or resumed Redis
  'store/redis/script.ts': 'test/store/redis-behaviour.test.ts', // the Lua script
  'store/redis/store.ts': 'test/store/redis.test.ts', // the store contract on Redis
  'store/remote.ts': 'test/store/redis-auth.test.ts', // a remote store's failures and readiness
  'store/store.ts': 'test/store/memory.test.ts', // the store interface, checked by the contract on every store
  'store/stored-key.ts': 'test/e2e/store-long-keys.test.ts', // long limit keys stored shortened
  'store/threads/lease-cells.ts': 'test/unit/store/threads/leases.test.ts', // the cells under the lease table's transitions
  'store/threads/lock.ts': 'test/store/shared-memory-threads.test.ts', // the table locked across threads
  'store/threads/store.ts': 'test/store/shared-memory.test.ts', // the store contract on the shared table
  'store/threads/table-layout.ts': 'test/store/table-room.test.ts', // the table's layout, through its room
  'store/threads/table.ts': 'test/store/table-room.test.ts', // the table's room and eviction
  'unknown-settings.ts': 'test/unit/settings.test.ts', // unknown FAIRVISOR_* variables refused
  'version.ts': 'test/e2e/cli-usage.test.ts', // --version
  'workers/config-share.ts': 'test/e2e/workers-bundle.test.ts', // the bundle handed to every worker
  'workers/generations.ts': 'test/e2e/workers-bundle.test.ts', // /readyz waits for every worker's bundle
  'workers/listen-handle.ts': 'test/e2e/workers.test.ts', // a listening socket per worker
  'workers/messages.ts': 'test/e2e/workers.test.ts', // supervisor and worker messages
  'workers/metrics-sum.ts': 'test/e2e/workers.test.ts', // /metrics summed over the workers
  'workers/network-share.ts': 'test/e2e/workers.test.ts', // network data handed to every worker
  'workers/pool.ts': 'test/e2e/workers-bundle.test.ts', // workers started, killed and restarted on the last good bundle
  'workers/supervisor.ts': 'test/e2e/workers.test.ts', // workers started, restarted, stopped
  'workers/worker-config.ts': 'test/e2e/workers-bundle.test.ts', // a worker runs the bundle the supervisor hands it
  'workers/worker.ts': 'test/e2e/workers.test.ts', // a worker thread serving requests
}

test('every src file has a unit test at the same path, or is listed as covered by another test', () => {
  const missing = SRC.filter((f) => !existsSync(join(ROOT, unitTestOf(f))) && !Object.hasOwn(COVERED_ELSEWHERE, f))
  assert.deepEqual(
    missing,
    [],
    `add test/unit/<same path>.test.ts, or a COVERED_ELSEWHERE entry naming the test that covers it:\n${missing
      .map((f) => `  '${f}': 'test/e2e/<feature>.test.ts', // <what that test drives>`)
      .join('\n')}`,
  )
})

describe('the covered-elsewhere list', () => {
  const listed = Object.keys(COVERED_ELSEWHERE)
  test('names only src files that exist', () => {
    assert.deepEqual(
      listed.filter((f) => !SRC.includes(f)),
      [],
      'these src files no longer exist: remove their entries',
    )
  })
  test('names only src files without a unit test', () => {
    assert.deepEqual(
      listed.filter((f) => existsSync(join(ROOT, unitTestOf(f)))),
      [],
      'these src files now have a unit test: remove their entries',
    )
  })
  test('names for each a test file that exists', () => {
    const noTest = Object.entries(COVERED_ELSEWHERE).filter(([, t]) => !t.endsWith('.test.ts') || !existsSync(join(ROOT, t)))
    assert.deepEqual(noTest, [], 'these entries name a test file that does not exist')
  })
  test('is sorted, so an entry is found by its path', () => {
    assert.deepEqual(listed, [...listed].sort())
  })
})

test('test/unit/ holds only unit tests, each of a src file at the same path', () => {
  const strays = files('test/unit').filter(
    (t) => !t.endsWith('.test.ts') || !SRC.includes(relative('test/unit', t).replace(/\.test\.ts$/, '.ts')),
  )
  assert.deepEqual(strays, [], 'move a unit test to the path of the src file it tests; shared helpers go to test/helpers/')
})

test('every src file has at most 250 lines: a longer one owns more than one thing', () => {
  const long = files('src')
    .filter((f) => f.endsWith('.ts'))
    .map((f) => [f, readFileSync(join(ROOT, f), 'utf8').split('\n').length - 1] as const)
    .filter(([, lines]) => lines > 250)
  assert.deepEqual(long, [], 'split these files by what they own')
})

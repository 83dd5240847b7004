/**
 * Traces end to end (docs/tracing.md): gateway processes on 2 worker threads export their spans over
 * OTLP/HTTP to a real receiver (test/helpers/otlp-receiver.ts, decoding the official opentelemetry-proto
 * definitions), with a real backend and real Redis. The client's trace is continued and reaches the
 * backend; the server, decision, store, batch and upstream spans hang together as docs/tracing.md says
 * (on Redis and on PostgreSQL);
 * the decision service's and gRPC's (ext_authz, RLS) decisions are spans too. Spans are waited for as
 * they arrive (the exporter's delay is OTEL_BSP_SCHEDULE_DELAY), never for a fixed time.
 */
import assert from 'node:assert/strict'
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { Metadata } from '@grpc/grpc-js'
import { Client } from 'undici'
import { checkRequest, grpcClients, type GrpcClients } from '../helpers/grpc-client.js'
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { dropPrefix, PG_URL, uniquePrefix } from '../helpers/postgres-db.js'
import { startRedis, type RedisServer } from '../helpers/redis-servers.js'

const BURST = 2

function writeConfig(): { bundle: string; rls: string } {
  const dir = mkdtempSync(join(tmpdir(), 'fv-tracing-'))
  const bundle = join(dir, 'bundle.json')
  const rule = {
    name: 'per_user',
    limit_keys: ['header:x-user'],
    algorithm: 'token_bucket',
    algorithm_config: { tokens_per_second: 0.0001, burst: BURST },
  }
  writeFileSync(
    bundle,
    JSON.stringify({ bundle_version: 1, policies: [{ id: 'api', spec: { selector: { pathPrefix: '/items' }, rules: [rule] } }] }),
  )
  const rls = join(dir, 'rls.yaml')
  writeFileSync(rls, 'domain: otel\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 100}\n')
  return { bundle, rls }
}

/** A new trace as a client starts it: its ids and its traceparent (sampled unless told). */
function clientTrace(sampled = true): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-${sampled ? '01' : '00'}` }
}

const inTrace = (spans: ReceivedSpan[], traceId: string): ReceivedSpan[] => spans.filter((s) => s.traceId === traceId)
const childOf = (spans: ReceivedSpan[], parent: ReceivedSpan, name: string): ReceivedSpan | undefined =>
  spans.find((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId && s.name === name)
/** The server span of a trace, once it came (the last span of a request to end: what ended before it came with or before it). */
const serverOf = (spans: ReceivedSpan[], traceId: string): ReceivedSpan | undefined =>
  spans.find((s) => s.traceId === traceId && s.kind === 'SPAN_KIND_SERVER')

/** `a` no later than `b`, give or take the millisecond a span's start is read to (Date.now(), then a duration is added). */
const noLater = (a: bigint, b: bigint): boolean => a <= b + 1_000_000n

/** Worker ids are numbers, the same on a span and on the resource of the thread that exported it. */
function assertWorker(s: ReceivedSpan): void {
  assert.equal(typeof s.resource['fairvisor.worker'], 'number', 'the resource names the worker')
  assert.equal(s.attributes['fairvisor.worker'], s.resource['fairvisor.worker'])
}

describe('traces: reverse proxy on Redis, 2 workers', () => {
  let receiver: OtlpReceiver
  let backend: Backend
  let redis: RedisServer
  let gw: GatewayProcess
  /** What the backend was sent, by the trace id in its path. */
  const seen = new Map<string, { traceparent?: string; tracestate?: string }>()

  before(async () => {
    receiver = await startOtlpReceiver()
    backend = await startBackend((req, res) => {
      seen.set(req.url!.split('/').pop()!, {
        traceparent: req.headers.traceparent as string | undefined,
        tracestate: req.headers.tracestate as string | undefined,
      })
      res.end('ok')
    })
    redis = await startRedis() // our own: a test below pauses its clients
    const { bundle } = writeConfig()
    gw = await startGateway(
      {
        FAIRVISOR_BACKEND_URL: backend.url,
        FAIRVISOR_CONFIG_FILE: bundle,
        FAIRVISOR_STORE: redis.url,
        FAIRVISOR_STORE_TIMEOUT_MS: '10000', // beyond the pause below
        FAIRVISOR_WORKERS: '2',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_SERVICE_NAME: 'fairvisor-e2e',
        // Parent-based ratio sampling: the client's decision is followed, a trace started here is never kept.
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0',
        OTEL_BSP_SCHEDULE_DELAY: '20',
      },
      { timeoutMs: 30_000 },
    )
  })
  after(async () => {
    await gw?.stop()
    await Promise.all([backend?.close(), receiver?.close(), redis?.stop()])
  })

  test("a proxied request: server, decision, store, batch and upstream spans under the client's span; the backend gets the trace", async () => {
    const t = clientTrace()
    const res = await fetch(`${gw.url}/items/${t.traceId}`, {
      headers: { traceparent: t.traceparent, tracestate: 'vendor=abc', 'x-user': randomUUID() },
    })
    assert.equal(res.status, 200)
    await res.text()
    const spans = await receiver.waitFor('the proxied request', (all) => {
      const s = inTrace(all, t.traceId)
      return serverOf(s, t.traceId) && s.some((x) => x.name === 'EVALSHA') ? s : undefined
    })
    const server = serverOf(spans, t.traceId)!
    assert.equal(server.parentSpanId, t.spanId, "the server span continues the client's")
    assert.equal(server.name, 'GET')
    assert.equal(server.attributes['http.request.method'], 'GET')
    assert.equal(server.attributes['url.path'], `/items/${t.traceId}`)
    assert.equal(server.attributes['http.response.status_code'], 200)
    assert.equal(server.resource['service.name'], 'fairvisor-e2e')
    assertWorker(server)

    const decision = childOf(spans, server, 'fairvisor.decision')
    assert.ok(decision, 'a decision span under the server span')
    assert.deepEqual(
      [
        decision.attributes['fairvisor.policy'],
        decision.attributes['fairvisor.rule'],
        decision.attributes['fairvisor.action'],
        decision.attributes['fairvisor.reason'],
        decision.attributes['fairvisor.store'],
        decision.attributes['fairvisor.fail_open'],
      ],
      ['api', 'per_user', 'allow', 'all_rules_passed', 'redis', false],
    )
    assertWorker(decision)

    const store = childOf(spans, decision, 'fairvisor.store')
    assert.ok(store, 'the store call under the decision')
    assert.equal(store.attributes['fairvisor.store'], 'redis')
    assert.ok(noLater(decision.startNs, store.startNs) && noLater(store.endNs, decision.endNs), 'the store call within the decision')
    const batch = spans.find((s) => s.name === 'EVALSHA')!
    assert.equal(batch.kind, 'SPAN_KIND_CLIENT')
    assert.equal(batch.parentSpanId, store.spanId, 'a batch of one is a child of its call')
    assert.deepEqual(batch.links, [{ traceId: t.traceId, spanId: store.spanId }])
    assert.equal(batch.attributes['db.system.name'], 'redis')
    assert.equal(batch.attributes['server.port'], redis.port)

    const upstream = spans.find((s) => s.kind === 'SPAN_KIND_CLIENT' && s.name === 'GET')
    assert.ok(upstream, 'the upstream call')
    assert.equal(upstream.parentSpanId, server.spanId)
    assert.equal(upstream.attributes['http.response.status_code'], 200)
    assert.equal(upstream.attributes['server.port'], backend.port)
    assert.ok(noLater(decision.endNs, upstream.startNs), 'forwarded after the decision')
    assert.deepEqual(seen.get(t.traceId), { traceparent: `00-${t.traceId}-${upstream.spanId}-01`, tracestate: 'vendor=abc' })
  })

  test("a rejected request's decision span carries the reason, its server span the 429, and there is no upstream span", async () => {
    const user = randomUUID()
    const traces = Array.from({ length: BURST + 1 }, () => clientTrace())
    const statuses: number[] = []
    for (const t of traces) {
      const res = await fetch(`${gw.url}/items/${t.traceId}`, { headers: { traceparent: t.traceparent, 'x-user': user } })
      statuses.push(res.status)
      await res.text()
    }
    assert.deepEqual(statuses, [200, 200, 429])
    const last = traces[BURST]!
    const spans = await receiver.waitFor('the rejected request', (all) =>
      serverOf(all, last.traceId) ? inTrace(all, last.traceId) : undefined,
    )
    const server = serverOf(spans, last.traceId)!
    assert.equal(server.attributes['http.response.status_code'], 429)
    const decision = childOf(spans, server, 'fairvisor.decision')!
    assert.equal(decision.attributes['fairvisor.action'], 'reject')
    assert.equal(decision.attributes['fairvisor.reason'], 'token_bucket_exceeded')
    assert.equal(decision.attributes['fairvisor.rule'], 'per_user')
    assert.ok(!spans.some((s) => s.kind === 'SPAN_KIND_CLIENT' && s.name === 'GET'), 'a rejected request is not forwarded')
    assert.equal(seen.has(last.traceId), false)
  })

  test('parent-based sampling: an unsampled or parentless request leaves no span, and the backend still gets its trace', async () => {
    // One connection: one worker, whose spans leave in the order they end.
    const client = new Client(gw.url)
    try {
      const get = async (id: string, traceparent?: string): Promise<void> => {
        const r = await client.request({
          path: `/items/${id}`,
          method: 'GET',
          headers: { 'x-user': randomUUID(), ...(traceparent && { traceparent }) },
        })
        assert.equal(r.statusCode, 200)
        await r.body.text()
      }
      const unsampled = clientTrace(false)
      await get(unsampled.traceId, unsampled.traceparent)
      const rootId = randomUUID()
      await get(rootId)
      const sampled = clientTrace()
      await get(sampled.traceId, sampled.traceparent)
      await receiver.waitFor('the sampled request', (all) => serverOf(all, sampled.traceId))

      const passed = seen.get(unsampled.traceId)!.traceparent!
      assert.match(passed, new RegExp(`^00-${unsampled.traceId}-[0-9a-f]{16}-00$`), 'the trace and its decision go on')
      assert.notEqual(passed.split('-')[2], unsampled.spanId, "the gateway's span is the backend's parent")
      const rooted = seen.get(rootId)!.traceparent!
      assert.match(rooted, /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/, 'a trace started here, not kept (ratio 0)')
      assert.deepEqual(inTrace(receiver.spans, unsampled.traceId), [])
      assert.deepEqual(inTrace(receiver.spans, rooted.split('-')[1]!), [])
    } finally {
      await client.close()
    }
  })

  test('a batch of Redis calls is one span linked to the store call of each request in it', async () => {
    // Redis holds its clients: each worker's first call waits in flight and the calls after it gather in one batch.
    redis.cli('CLIENT', 'PAUSE', '1000', 'ALL')
    const traces = Array.from({ length: 12 }, () => clientTrace())
    // Each request on a connection of its own, so that both workers take some.
    const statuses = await Promise.all(
      traces.map(async (t) => {
        const client = new Client(gw.url)
        try {
          const r = await client.request({
            path: `/items/${t.traceId}`,
            method: 'GET',
            headers: { traceparent: t.traceparent, 'x-user': randomUUID() },
          })
          await r.body.text()
          return r.statusCode
        } finally {
          await client.close()
        }
      }),
    )
    assert.deepEqual(new Set(statuses), new Set([200]))
    const ids = new Set(traces.map((t) => t.traceId))
    // Every request's store call is linked from a batch span, and some batch holds more than one.
    const { stores, batches } = await receiver.waitFor('the batches', (all) => {
      const stores = all.filter((s) => ids.has(s.traceId) && s.name === 'fairvisor.store')
      const batches = all.filter((s) => s.name === 'EVALSHA' && s.links.some((l) => ids.has(l.traceId)))
      const linked = new Set(batches.flatMap((b) => b.links.map((l) => l.spanId)))
      const done = stores.length === traces.length && stores.every((s) => linked.has(s.spanId)) && batches.some((b) => b.links.length > 1)
      return done ? { stores, batches } : undefined
    })
    const storeById = new Map(stores.map((s) => [s.spanId, s]))
    for (const b of batches) {
      const linked = b.links.map((l) => storeById.get(l.spanId))
      assert.ok(
        linked.every((s, i) => s !== undefined && s.traceId === b.links[i]!.traceId),
        'each link is the store call of a request of the batch',
      )
      assert.equal(new Set(b.links.map((l) => l.traceId)).size, b.links.length, 'one link per request')
      assert.ok(storeById.has(b.parentSpanId), "the batch span is a child of one of its requests' store calls")
      assert.equal(b.traceId, storeById.get(b.parentSpanId)!.traceId)
      if (b.links.length > 1) assert.equal(b.attributes['db.operation.batch.size'], b.links.length, 'every request of it traced')
      else assert.equal(b.attributes['db.operation.batch.size'], undefined)
    }
  })
})

describe('traces: decision service and gRPC (ext_authz, RLS), 2 workers', () => {
  let receiver: OtlpReceiver
  let gw: GatewayProcess
  let c: GrpcClients

  before(async () => {
    receiver = await startOtlpReceiver()
    const { bundle, rls } = writeConfig()
    gw = await startGateway(
      {
        FAIRVISOR_MODE: 'decision_service',
        FAIRVISOR_CONFIG_FILE: bundle,
        FAIRVISOR_RLS_CONFIG: rls,
        FAIRVISOR_GRPC_PORT: '0',
        FAIRVISOR_STORE: 'redis://127.0.0.1:6379',
        FAIRVISOR_STORE_TIMEOUT_MS: '2000',
        FAIRVISOR_WORKERS: '2',
        FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '20',
      },
      { timeoutMs: 30_000 },
    )
    c = grpcClients((await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('fairvisor listening'))).grpcPort as number)
  })
  after(async () => {
    c?.close()
    await gw?.stop()
    await receiver?.close()
  })

  /** The calls' server spans under the client's span (several calls may share it), and their decision spans under them. */
  async function callSpans(t: { traceId: string; spanId: string }, what: string, calls = 1, decisions = calls) {
    const spans = await receiver.waitFor(what, (all) => {
      const s = inTrace(all, t.traceId)
      return s.filter((x) => x.kind === 'SPAN_KIND_SERVER').length >= calls &&
        s.filter((x) => x.name === 'fairvisor.decision').length >= decisions
        ? s
        : undefined
    })
    const servers = spans.filter((s) => s.kind === 'SPAN_KIND_SERVER')
    for (const server of servers) {
      assert.equal(server.parentSpanId, t.spanId, "under the caller's span")
      assertWorker(server)
    }
    const ds = spans.filter((s) => s.name === 'fairvisor.decision')
    for (const d of ds) assert.ok(servers.some((x) => x.spanId === d.parentSpanId && x.traceId === d.traceId))
    return { server: servers[0]!, decisions: ds, spans }
  }

  test('a /v1/decision call: its server span and the decision under it, with its store call', async () => {
    const t = clientTrace()
    const res = await fetch(`${gw.url}/v1/decision`, {
      method: 'POST',
      headers: { traceparent: t.traceparent, 'x-original-uri': '/items/a', 'x-original-method': 'GET', 'x-user': randomUUID() },
    })
    assert.equal(res.status, 200)
    const { server, decisions, spans } = await callSpans(t, 'the decision call')
    assert.equal(server.name, 'POST /v1/decision')
    assert.equal(server.attributes['http.route'], '/v1/decision')
    assert.equal(server.attributes['http.response.status_code'], 200)
    const [d] = decisions
    assert.equal(d!.attributes['fairvisor.policy'], 'api')
    assert.equal(d!.attributes['fairvisor.action'], 'allow')
    assertWorker(d!)
    assert.ok(childOf(spans, d!, 'fairvisor.store'))
  })

  test("ext_authz Check: under the traceparent of the request it describes, or of the call's own metadata first", async () => {
    const user = randomUUID()
    const described = clientTrace()
    const ok = await c.check(checkRequest({ path: '/items/b', headers: { traceparent: described.traceparent, 'x-user': user } }))
    assert.equal(ok.status.code, 0)
    const { server, decisions } = await callSpans(described, 'the Check call')
    assert.equal(server.name, 'envoy.service.auth.v3.Authorization/Check')
    assert.equal(server.attributes['rpc.system.name'], 'grpc')
    assert.equal(server.attributes['rpc.method'], 'envoy.service.auth.v3.Authorization/Check')
    assert.equal(server.attributes['rpc.status_code'], 'OK')
    assert.equal(decisions[0]!.attributes['fairvisor.reason'], 'all_rules_passed')

    // Envoy's own span (its tracer's traceparent on the call) is the closer parent: it wins.
    const call = clientTrace()
    const other = clientTrace()
    const md = new Metadata()
    md.set('traceparent', call.traceparent)
    for (let i = 0; i < BURST; i++)
      await new Promise((resolve, reject) =>
        // biome-ignore lint/suspicious/noExplicitAny: the client is built from the .proto at run time.
        (c.authz as any).Check(
          checkRequest({ path: '/items/b', headers: { traceparent: other.traceparent, 'x-user': user } }),
          md,
          (e: Error, r: unknown) => (e ? reject(e) : resolve(r)),
        ),
      )
    const last = await callSpans(call, 'the Check calls under their metadata', BURST)
    assert.equal(inTrace(receiver.spans, other.traceId).length, 0)
    assert.equal(
      last.decisions.find((d) => d.attributes['fairvisor.action'] === 'reject')?.attributes['fairvisor.reason'],
      'token_bucket_exceeded',
    )
  })

  test('ShouldRateLimit: the call span and its decision, under the call metadata traceparent', async () => {
    const t = clientTrace()
    const md = new Metadata()
    md.set('traceparent', t.traceparent)
    const req = { domain: 'otel', descriptors: [{ entries: [{ key: 'user', value: randomUUID() }] }] }
    const res = await new Promise<{ overall_code: number }>((resolve, reject) =>
      // biome-ignore lint/suspicious/noExplicitAny: the client is built from the .proto at run time.
      (c.rls as any).ShouldRateLimit(req, md, (e: Error, r: { overall_code: number }) => (e ? reject(e) : resolve(r))),
    )
    assert.equal(res.overall_code, 1) // OK
    // Two decisions: the RLS configuration's limits, and the bundle's (each descriptor decided as POST /otel).
    const { server, decisions, spans } = await callSpans(t, 'the ShouldRateLimit call', 1, 2)
    assert.equal(server.attributes['rpc.method'], 'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit')
    const rls = decisions.find((d) => d.attributes['fairvisor.policy'] === 'rls:otel')
    assert.ok(rls, 'the configuration limits decided under the call')
    assert.equal(rls.attributes['fairvisor.action'], 'allow')
    assert.ok(childOf(spans, rls, 'fairvisor.store'), 'its store call under it')
  })
})

describe('traces: PostgreSQL store', () => {
  let receiver: OtlpReceiver
  let backend: Backend
  let gw: GatewayProcess
  const prefix = uniquePrefix('otel')

  before(async () => {
    receiver = await startOtlpReceiver()
    backend = await startBackend()
    const { bundle } = writeConfig()
    gw = await startGateway(
      {
        FAIRVISOR_BACKEND_URL: backend.url,
        FAIRVISOR_CONFIG_FILE: bundle,
        FAIRVISOR_STORE: PG_URL,
        FAIRVISOR_PG_TABLE_PREFIX: prefix,
        FAIRVISOR_PG_POOL_SIZE: '1', // one statement at a time: the calls behind it gather in the next one
        FAIRVISOR_STORE_TIMEOUT_MS: '5000',
        FAIRVISOR_WORKERS: '2',
        FAIRVISOR_OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '20',
      },
      { timeoutMs: 30_000 },
    )
  })
  after(async () => {
    await gw?.stop()
    await Promise.all([backend?.close(), receiver?.close()])
    await dropPrefix(prefix)
  })

  test("each request's store call is linked from the statement that carried it", async () => {
    const traces = Array.from({ length: 6 }, () => clientTrace())
    await Promise.all(
      traces.map(async (t) => {
        const res = await fetch(`${gw.url}/items/${t.traceId}`, {
          headers: { traceparent: t.traceparent, 'x-user': randomUUID(), connection: 'close' },
        })
        assert.equal(res.status, 200)
        await res.text()
      }),
    )
    const ids = new Set(traces.map((t) => t.traceId))
    const take = `${prefix}take`
    const { stores, statements } = await receiver.waitFor('the statements', (all) => {
      const stores = all.filter((s) => ids.has(s.traceId) && s.name === 'fairvisor.store')
      const statements = all.filter((s) => s.name === `SELECT ${take}`)
      const linked = new Set(statements.flatMap((b) => b.links.map((l) => l.spanId)))
      return stores.length === traces.length && stores.every((s) => linked.has(s.spanId)) ? { stores, statements } : undefined
    })
    for (const s of stores) assert.equal(s.attributes['fairvisor.store'], 'postgres')
    for (const st of statements.filter((x) => x.links.some((l) => ids.has(l.traceId)))) {
      assert.equal(st.kind, 'SPAN_KIND_CLIENT')
      assert.ok(
        st.links.some((l) => l.spanId === st.parentSpanId),
        "a child of one of its requests' store calls",
      )
      assert.deepEqual(
        [
          st.attributes['db.system.name'],
          st.attributes['db.stored_procedure.name'],
          st.attributes['db.namespace'],
          st.attributes['server.port'],
        ],
        ['postgresql', take, new URL(PG_URL).pathname.slice(1), Number(new URL(PG_URL).port || 5432)],
      )
      assert.equal(st.attributes['db.operation.batch.size'], st.links.length > 1 ? st.links.length : undefined)
    }
  })
})

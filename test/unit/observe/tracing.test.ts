/**
 * The tracing module on the real SDK, exporting to a real OTLP/HTTP receiver: off without an endpoint,
 * the caller's trace context read from flat and object headers, ours written in its place, store-call
 * spans ended with their errors, a batch's span linked to its sampled calls. Stopping flushes every span.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { trace } from '@opentelemetry/api'
import {
  batchSpan,
  endSpan,
  ending,
  injectInto,
  parentFromRaw,
  parentFromRecord,
  SpanKind,
  startSpan,
  startTracing,
  storeCallSpan,
  tracer,
  under,
} from '../../../src/observe/tracing.js'
import type { TraceSettings } from '../../../src/settings-trace.js'
import { startOtlpReceiver, type OtlpReceiver } from '../../helpers/otlp-receiver.js'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const PARENT = '00f067aa0ba902b7'

describe('tracing off', () => {
  test('no endpoint: nothing starts, the tracer stays null', async () => {
    const settings: TraceSettings = { otlpTracesUrl: undefined, serviceName: 'x', sampler: 'always_on', samplerRatio: 1 }
    assert.equal(await startTracing(settings, undefined), undefined)
    assert.equal(tracer, null)
  })
})

describe('a collector that never answers', () => {
  test('does not hold the shutdown: the last export is given up', { timeout: 30_000 }, async () => {
    const server = createServer(() => {}) // takes the export, never answers it
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`
    const stop = (await startTracing({ otlpTracesUrl: url, serviceName: 'x', sampler: 'always_on', samplerRatio: 1 }, undefined))!
    const exported = once(server, 'request')
    startSpan('GET', SpanKind.SERVER, parentFromRaw([])).end()
    await Promise.all([stop(), exported])
    assert.equal(tracer, null)
    server.closeAllConnections()
    server.close()
  })
})

describe('tracing on', () => {
  let receiver: OtlpReceiver
  let stop: () => Promise<void>
  before(async () => {
    receiver = await startOtlpReceiver()
    const settings: TraceSettings = {
      otlpTracesUrl: `${receiver.endpoint}/v1/traces`,
      serviceName: 'unit',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    }
    stop = (await startTracing(settings, 3))!
  })
  after(() => receiver.close())

  test("the caller's trace context from a flat header list: any case, tracestate lines joined", () => {
    const ctx = parentFromRaw(['Host', 'a', 'TraceParent', `00-${TRACE}-${PARENT}-01`, 'tracestate', 'a=1', 'TRACESTATE', 'b=2'])
    const sc = trace.getSpanContext(ctx)!
    assert.deepEqual([sc.traceId, sc.spanId, sc.traceFlags, sc.isRemote], [TRACE, PARENT, 1, true])
    assert.equal(sc.traceState?.serialize(), 'a=1,b=2')
    assert.equal(trace.getSpanContext(parentFromRaw(['host', 'a'])), undefined, 'none sent: a new trace')
    assert.equal(trace.getSpanContext(parentFromRaw(['traceparent', 'garbage'])), undefined, 'a bad one is ignored')
  })

  test('from a header object: undefined without a valid traceparent, so the caller can look elsewhere', () => {
    assert.equal(parentFromRecord(undefined), undefined)
    assert.equal(parentFromRecord({ 'x-user': 'a' }), undefined)
    assert.equal(parentFromRecord({ traceparent: '00-zz-yy-01' }), undefined)
    assert.equal(trace.getSpanContext(parentFromRecord({ traceparent: `00-${TRACE}-${PARENT}-00` })!)?.traceFlags, 0)
  })

  test("ours replaces the client's traceparent and tracestate, whatever their case", () => {
    const parent = parentFromRaw(['traceparent', `00-${TRACE}-${PARENT}-01`, 'tracestate', 'v=1'])
    const span = startSpan('GET', SpanKind.CLIENT, parent)
    const headers = ['Traceparent', 'old', 'x-user', 'a', 'TRACESTATE', 'old']
    injectInto(under(parent, span), headers)
    span.end()
    assert.deepEqual(headers, ['x-user', 'a', 'traceparent', `00-${TRACE}-${span.spanContext().spanId}-01`, 'tracestate', 'v=1'])
  })

  test("a batch's span: a child of its first sampled call, linked to each sampled call not yet settled", () => {
    // The store call goes under a decision span of the gateway's own, kept or not as its caller said.
    const remote = parentFromRaw(['traceparent', `00-${TRACE}-${PARENT}-01`])
    const sampled = under(remote, startSpan('fairvisor.decision', SpanKind.INTERNAL, remote))
    const quietRemote = parentFromRaw(['traceparent', `00-${'1'.repeat(32)}-${PARENT}-00`])
    const unsampled = under(quietRemote, startSpan('fairvisor.decision', SpanKind.INTERNAL, quietRemote))
    const a = storeCallSpan(sampled, 'redis', 2)!
    const b = storeCallSpan(sampled, 'redis', 1)!
    assert.equal(storeCallSpan(unsampled, 'redis', 1), undefined, 'a request not sampled makes no store-call span')
    const quiet = startSpan('x', SpanKind.INTERNAL, unsampled)
    assert.equal(quiet.isRecording(), false)
    assert.equal(batchSpan('EVALSHA', {}, [{ settled: false }, { span: quiet, settled: false }], 2), undefined, 'nothing sampled: no span')
    const gone = storeCallSpan(sampled, 'redis', 1)!
    const batch = batchSpan(
      'EVALSHA',
      { 'db.system.name': 'redis' },
      [
        { settled: false },
        { span: quiet, settled: false },
        { span: a, settled: false },
        { span: gone, settled: true },
        { span: b, settled: false },
      ],
      4,
    )!
    batch.end()
    const one = batchSpan('EVALSHA', {}, [{ span: b, settled: false }], 1)!
    one.end()
    ending(a, () => {})(null)
    ending(b, () => {})(Object.assign(new Error('redis call timed out'), { code: 'FV_STORE_TIMEOUT' }))
    endSpan(gone)
    quiet.end()
    return stop().then(() => {
      assert.equal(tracer, null, 'stopped')
      const byId = new Map(receiver.spans.map((s) => [s.spanId, s]))
      const got = byId.get(batch.spanContext().spanId)!
      assert.equal(got.kind, 'SPAN_KIND_CLIENT')
      assert.equal(got.parentSpanId, a.spanContext().spanId)
      assert.deepEqual(
        got.links.map((l) => l.spanId),
        [a.spanContext().spanId, b.spanContext().spanId],
      )
      assert.equal(got.attributes['db.operation.batch.size'], 4)
      assert.equal(byId.get(one.spanContext().spanId)!.attributes['db.operation.batch.size'], undefined, 'a batch of one is none')
      const failed = byId.get(b.spanContext().spanId)!
      assert.deepEqual([failed.status, failed.attributes['error.type']], ['STATUS_CODE_ERROR', 'FV_STORE_TIMEOUT'])
      assert.deepEqual(
        [byId.get(a.spanContext().spanId)!.status, byId.get(a.spanContext().spanId)!.attributes['fairvisor.store']],
        ['STATUS_CODE_UNSET', 'redis'],
      )
      assert.equal(byId.has(quiet.spanContext().spanId), false, 'an unsampled span is never exported')
      assert.deepEqual([got.resource['service.name'], got.resource['fairvisor.worker']], ['unit', 3])
    })
  })
})

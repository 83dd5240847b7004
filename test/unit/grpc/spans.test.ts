/**
 * A gRPC call's server span on the real SDK and a real OTLP receiver: the call's own traceparent first,
 * then the one of the request an ext_authz CheckRequest describes (its headers map or, with Envoy's
 * encode_raw_headers, its header_map); the RPC semantic conventions' attributes; which codes are errors.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { describedHeaders, rpcSpan } from '../../../src/grpc/spans.js'
import { GrpcStatus } from '../../../src/grpc/status.js'
import { startTracing } from '../../../src/observe/tracing.js'
import { startOtlpReceiver, type OtlpReceiver } from '../../helpers/otlp-receiver.js'

const tp = (trace: string, span: string) => `00-${trace.repeat(32)}-${span.repeat(16)}-01`
const CHECK = '/envoy.service.auth.v3.Authorization/Check'

describe('gRPC spans', () => {
  let receiver: OtlpReceiver
  let stop: () => Promise<void>
  before(async () => {
    receiver = await startOtlpReceiver()
    stop = (await startTracing(
      { otlpTracesUrl: `${receiver.endpoint}/v1/traces`, serviceName: 'unit', sampler: 'parentbased_always_on', samplerRatio: 1 },
      2,
    ))!
  })
  after(() => receiver.close())

  test("the described request's headers, from either of Envoy's forms", () => {
    assert.equal(describedHeaders({}), undefined)
    assert.deepEqual(describedHeaders({ attributes: { request: { http: { headers: { traceparent: 'x' } } } } }), { traceparent: 'x' })
    const raw = {
      headers: [
        { key: 'TraceParent', raw_value: Buffer.from('y') },
        { key: 'x-user', value: 'a' },
      ],
    }
    assert.deepEqual(describedHeaders({ attributes: { request: { http: { header_map: raw } } } }), { traceparent: 'y', 'x-user': 'a' })
  })

  test('parents, attributes and statuses', async () => {
    const own = rpcSpan(CHECK, { traceparent: tp('a', '1') }, { traceparent: tp('b', '2') }, 2)
    own.end(GrpcStatus.OK)
    own.end(GrpcStatus.INTERNAL) // once only
    const described = rpcSpan(CHECK, {}, { traceparent: tp('b', '2') })
    described.end(GrpcStatus.PERMISSION_DENIED) // a reject is the service working
    const fresh = rpcSpan('/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit', { traceparent: 'garbage' }, undefined)
    fresh.end(GrpcStatus.UNAVAILABLE)
    await stop()

    const [a, b, c] = receiver.spans
    assert.deepEqual([a!.traceId, a!.parentSpanId, a!.kind, a!.name], ['a'.repeat(32), '1'.repeat(16), 'SPAN_KIND_SERVER', CHECK.slice(1)])
    assert.deepEqual(a!.attributes, {
      'rpc.system.name': 'grpc',
      'rpc.method': 'envoy.service.auth.v3.Authorization/Check',
      'fairvisor.worker': 2,
      'rpc.status_code': 'OK',
    })
    assert.equal(a!.status, 'STATUS_CODE_UNSET')
    assert.deepEqual(
      [b!.traceId, b!.parentSpanId, b!.attributes['rpc.status_code'], b!.status],
      ['b'.repeat(32), '2'.repeat(16), 'PERMISSION_DENIED', 'STATUS_CODE_UNSET'],
    )
    assert.equal(c!.parentSpanId, '', 'no valid traceparent: a trace starts here')
    assert.deepEqual([c!.status, c!.attributes['error.type']], ['STATUS_CODE_ERROR', 'UNAVAILABLE'])
    assert.equal(receiver.spans.length, 3)
  })
})

/**
 * The HTTP listener's spans on a real node:http server, the real SDK and a real OTLP receiver: the
 * server span under the client's traceparent, with the HTTP semantic conventions' attributes and its
 * status; a client gone before its answer; the upstream span written into the upstream request's
 * headers in place of the client's; the wait of a delayed request.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { delaySpan, serverSpan, upstreamEnd, upstreamSpan, upstreamStatus } from '../../../src/http/spans.js'
import { startTracing, type Context } from '../../../src/observe/tracing.js'
import { startOtlpReceiver, type OtlpReceiver } from '../../helpers/otlp-receiver.js'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const CLIENT_SPAN = '00f067aa0ba902b7'
const QUIET = 'a'.repeat(32)

describe('HTTP spans', () => {
  let receiver: OtlpReceiver
  let stop: () => Promise<void>
  before(async () => {
    receiver = await startOtlpReceiver()
    stop = (await startTracing(
      { otlpTracesUrl: `${receiver.endpoint}/v1/traces`, serviceName: 'unit', sampler: 'parentbased_always_on', samplerRatio: 1 },
      undefined,
    ))!
  })
  after(() => receiver.close())

  test('server, upstream and delay spans, ended with what happened', async () => {
    const contexts: Context[] = []
    const upstreamHeaders: string[][] = []
    const closed: Promise<unknown>[] = []
    let arrived: () => void
    const goneArrived = new Promise<void>((r) => (arrived = r))
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      const ctx = serverSpan(req, res, 4)
      contexts.push(ctx)
      closed.push(once(res, 'close'))
      if (req.url === '/gone') return arrived() // never answered: the client leaves
      const headers = ['traceparent', 'from-the-client', 'x-user', 'a']
      const up = upstreamSpan(ctx, 'GET', new URL('http://backend.internal'), '/items?key=secret', headers)
      upstreamHeaders.push(headers)
      if (up === undefined) {
        // Not sampled: no span past the server's, whose context the backend gets.
        assert.equal(delaySpan(ctx, 40), undefined)
        return void res.writeHead(200).end()
      }
      upstreamStatus(up, req.url === '/fail' ? 503 : 200)
      upstreamEnd(up, null)
      delaySpan(ctx, 40)!.end()
      res.writeHead(req.url === '/fail' ? 502 : 200).end()
    }
    const server = createServer(handler)
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const port = (server.address() as AddressInfo).port
    const get = (path: string, headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = request({ port, path, headers }, (res) => {
          res.resume()
          resolve(res.statusCode!)
        })
        req.on('error', reject)
        if (path === '/gone') void goneArrived.then(() => req.destroy())
        req.end()
      })
    assert.equal(
      await get('/items?key=secret', { traceparent: `00-${TRACE}-${CLIENT_SPAN}-01`, 'user-agent': 'unit/1', host: 'api.example:8080' }),
      200,
    )
    assert.equal(await get('/fail', {}), 502)
    await get('/gone', {}).catch(() => undefined)
    assert.equal(await get('/quiet', { traceparent: `00-${QUIET}-${CLIENT_SPAN}-00` }), 200)
    await Promise.all(closed)
    server.close()
    await stop()

    const [ok, failed, gone] = contexts.map((_, i) => receiver.spans.filter((s) => s.kind === 'SPAN_KIND_SERVER')[i]!)
    assert.deepEqual([ok!.traceId, ok!.parentSpanId, ok!.name], [TRACE, CLIENT_SPAN, 'GET'])
    assert.deepEqual(ok!.attributes, {
      'http.request.method': 'GET',
      'url.path': '/items',
      'url.scheme': 'http',
      'network.peer.address': '127.0.0.1',
      'server.address': 'api.example',
      'user_agent.original': 'unit/1',
      'fairvisor.worker': 4,
      'http.response.status_code': 200,
    })
    assert.equal(ok!.status, 'STATUS_CODE_UNSET')
    assert.deepEqual([failed!.status, failed!.attributes['error.type'], failed!.parentSpanId], ['STATUS_CODE_ERROR', '502', ''])
    assert.deepEqual([gone!.status, gone!.attributes['error.type']], ['STATUS_CODE_ERROR', 'client_closed'])

    const upstream = receiver.spans.filter((s) => s.kind === 'SPAN_KIND_CLIENT')
    assert.equal(upstream.length, 2)
    assert.equal(upstream[0]!.parentSpanId, ok!.spanId)
    assert.deepEqual(upstream[0]!.attributes, {
      'http.request.method': 'GET',
      'server.address': 'backend.internal',
      'server.port': 80,
      'url.full': 'http://backend.internal/items',
      'http.response.status_code': 200,
    })
    assert.deepEqual(upstreamHeaders[0], ['x-user', 'a', 'traceparent', `00-${TRACE}-${upstream[0]!.spanId}-01`])
    assert.deepEqual([upstream[1]!.status, upstream[1]!.attributes['error.type']], ['STATUS_CODE_ERROR', '503'])
    assert.match(upstreamHeaders[2]![3]!, new RegExp(`^00-${QUIET}-[0-9a-f]{16}-00$`))
    assert.notEqual(upstreamHeaders[2]![3]!.split('-')[2], CLIENT_SPAN)
    assert.equal(receiver.spans.filter((s) => s.traceId === QUIET).length, 0, 'a request not sampled exports nothing')
    const delay = receiver.spans.find((s) => s.name === 'fairvisor.delay' && s.traceId === TRACE)!
    assert.deepEqual([delay.parentSpanId, delay.attributes['fairvisor.delay_ms']], [ok!.spanId, 40])
  })
})

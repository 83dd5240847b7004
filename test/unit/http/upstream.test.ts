/**
 * The proxy's own upstream pool against a real TCP backend that answers with
 * exact bytes: keep-alive reuse, interim responses skipped, chunked and
 * close-delimited bodies, HEAD, long heads split across reads, the idle
 * connection a backend closed, queueing past the connection limit, errors.
 */
import assert from 'node:assert/strict'
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { after, before, test } from 'node:test'
import { UpstreamPool, type UpstreamConn, type UpstreamExchange } from '../../../src/http/upstream.js'

interface Got {
  status: number
  reason: string
  headers: string[]
  body: string
}

/** An exchange that collects what comes back; resolves on end, rejects on error. */
function exchange(): { x: UpstreamExchange; done: Promise<Got> } {
  const got: Got = { status: 0, reason: '', headers: [], body: '' }
  let resolve!: (g: Got) => void
  let reject!: (e: Error) => void
  const done = new Promise<Got>((res, rej) => {
    resolve = res
    reject = rej
  })
  const x: UpstreamExchange = {
    conn: undefined as UpstreamConn | undefined,
    gone: false,
    extraHeaders: undefined,
    head(status, reason, headers) {
      Object.assign(got, { status, reason, headers })
    },
    body(chunk) {
      got.body += chunk.toString('latin1')
      return true
    },
    flush: () => true,
    end: () => resolve(got),
    error: (err) => reject(err),
  }
  return { x, done }
}

/** Requests seen by the backend, and how each is answered (by its path). */
const answers = new Map<string, (s: Socket) => void>()
let server: Server
let port = 0
let connections = 0

before(async () => {
  server = createServer((s) => {
    connections++
    let buf = ''
    s.on('data', (d) => {
      buf += d.toString('latin1')
      let end = buf.indexOf('\r\n\r\n')
      while (end !== -1) {
        const path = buf.slice(0, end).split(' ')[1]!
        buf = buf.slice(end + 4)
        answers.get(path)?.(s)
        end = buf.indexOf('\r\n\r\n')
      }
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  port = (server.address() as AddressInfo).port
})
after(() => new Promise<void>((r) => server.close(() => r())))

const pool = (n = 4, timeoutMs = 2000): UpstreamPool =>
  new UpstreamPool({ host: '127.0.0.1', port, connections: n, timeoutMs, connectTimeoutMs: 1000 })
const get = (p: UpstreamPool, path: string, method = 'GET'): Promise<Got> => {
  const { x, done } = exchange()
  p.request(x, `${method} ${path} HTTP/1.1\r\nhost: t\r\n\r\n`, method === 'HEAD')
  return done
}

test('a keep-alive connection serves the next request; a 100 Continue is skipped; a chunked body arrives whole', async () => {
  answers.set('/a', (s) =>
    s.write(
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 Fine\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n',
    ),
  )
  const p = pool()
  const before = connections
  const one = await get(p, '/a')
  const two = await get(p, '/a')
  assert.deepEqual([one.status, one.reason, one.body, one.headers], [200, 'Fine', 'abcde', ['x-a', '1']])
  assert.equal(two.body, 'abcde')
  assert.equal(connections - before, 1)
  p.close()
})

test('HEAD reads no body; a close-delimited body ends with the close', async () => {
  answers.set('/head', (s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n'))
  answers.set('/close', (s) => s.end('HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end'))
  const p = pool()
  assert.equal((await get(p, '/head', 'HEAD')).body, '')
  const c = await get(p, '/close')
  assert.equal(c.body, 'until the end')
  assert.deepEqual(c.headers, [])
  p.close()
})

test('a long head split across reads keeps every header, repeated names grouped at their first place', async () => {
  answers.set('/long', (s) => {
    let head = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nSet-Cookie: a=1\r\n'
    for (let i = 0; i < 40; i++) head += `X-H${i}: ${i}\r\n`
    head += 'Set-Cookie: b=2\r\nKeep-Alive: timeout=5\r\n\r\nok'
    s.write(head.slice(0, 200))
    setImmediate(() => s.write(head.slice(200)))
  })
  const p = pool()
  const g = await get(p, '/long')
  assert.equal(g.body, 'ok')
  assert.equal(g.headers.length, 2 * 43)
  assert.deepEqual(g.headers.slice(0, 6), ['content-length', '2', 'set-cookie', 'a=1', 'set-cookie', 'b=2'])
  assert.deepEqual(g.headers.slice(-2), ['x-h39', '39'])
  p.close()
})

test('an idle connection the backend closed is not reused; past the limit requests wait their turn', async () => {
  answers.set('/bye', (s) => s.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi'))
  answers.set('/slowish', (s) => setTimeout(() => s.write('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz'), 50))
  const p = pool(1)
  assert.equal((await get(p, '/bye')).body, 'hi') // keep-alive by its head, closed by the backend
  const both = await Promise.all([get(p, '/slowish'), get(p, '/slowish')])
  assert.deepEqual(
    both.map((g) => g.body),
    ['z', 'z'],
  )
  p.close()
})

test('a refused connection and a backend that never answers end in coded errors', async () => {
  answers.set('/never', () => {})
  const p = pool(2, 150)
  await assert.rejects(get(p, '/never'), { code: 'UND_ERR_HEADERS_TIMEOUT' })
  p.close()
  const closed = createServer()
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r))
  const free = (closed.address() as AddressInfo).port
  await new Promise<void>((r) => closed.close(() => r()))
  const nobody = new UpstreamPool({ host: '127.0.0.1', port: free, connections: 1, timeoutMs: 1000, connectTimeoutMs: 1000 })
  const { x, done } = exchange()
  nobody.request(x, 'GET / HTTP/1.1\r\nhost: t\r\n\r\n', false)
  await assert.rejects(done, { code: 'ECONNREFUSED' })
})

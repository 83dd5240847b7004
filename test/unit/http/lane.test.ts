/**
 * The client lane on a real node:http server and raw client sockets: the
 * requests it takes are answered by its routes, anything else (a body, an
 * upgrade, HTTP/1.0, a route that declines) by node:http on the same
 * connection from that request on; pipelined requests in order; parse errors
 * and slow heads through the server's 'clientError'; the idle keep-alive
 * time; the client's end; shutdown.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import { after, before, test } from 'node:test'
import { Lane, type LaneRoutes } from '../../../src/http/lane.js'
import type { LaneExchange } from '../../../src/http/lane-exchange.js'
import { createLogger } from '../../../src/observe/logger.js'

let server: Server
let lane: Lane
let port = 0
/** Requests the lane's route answers later, by path (`/later/...`): answered when released. */
const later: LaneExchange[] = []
/** The first request held by the route, once it has come. */
async function heldRequest(): Promise<LaneExchange> {
  while (later.length === 0) await new Promise((r) => setImmediate(r))
  return later.shift()!
}
let clientErrors: string[] = []
const headersSeen: number[] = []

const routes: LaneRoutes = {
  take: (x) => !x.url.startsWith('/node'),
  run(x) {
    headersSeen.push(x.rawHeaders.length / 2)
    if (x.url.startsWith('/later')) return void later.push(x)
    x.answer(200, ['x-by', 'lane'], `lane ${x.method} ${x.url}`)
  },
}

before(async () => {
  server = createServer((req, res) => {
    let body = ''
    req.on('data', (d) => (body += d))
    req.on('end', () => {
      res.setHeader('x-by', 'node')
      res.end(`node ${req.method} ${req.url} ${body}`)
    })
  })
  server.on('clientError', (err: Error & { code?: string }, socket: Socket) => {
    clientErrors.push(err.code ?? '')
    socket.end(`HTTP/1.1 ${err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400} x\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`)
  })
  server.on('upgrade', (req, socket: Socket) => socket.end(`HTTP/1.1 101 Switching\r\nupgrade: x\r\n\r\nupgraded ${req.url}`))
  const log = createLogger('silent')
  lane = new Lane(server, routes, { headersTimeoutMs: 300, requestTimeoutMs: 0, keepAliveTimeoutMs: 400, maxHeaderSize: 1024 }, log)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  port = (server.address() as AddressInfo).port
})

after(() => {
  lane.close(true)
  server.closeAllConnections()
  server.close()
})

/** A raw client: sends `text`, collects everything until `until` is in it (or the connection closes). */
async function exchange(text: string | string[], until: (got: string) => boolean, socket?: Socket): Promise<{ got: string; s: Socket }> {
  const s = socket ?? connect(port, '127.0.0.1')
  let got = ''
  const done = new Promise<void>((resolve) => {
    const check = (): void => {
      if (!until(got)) return
      s.off('data', onData)
      resolve()
    }
    const onData = (d: Buffer): void => {
      got += d.toString('latin1')
      check()
    }
    s.on('data', onData)
    s.once('close', () => resolve())
  })
  for (const part of Array.isArray(text) ? text : [text]) s.write(part)
  await done
  return { got, s }
}

const count = (got: string, what: string): number => got.split(what).length - 1

test("a plain request is the lane's, with keep-alive and Date; the connection stays open for the next", async () => {
  const { got, s } = await exchange('GET /a HTTP/1.1\r\nhost: x\r\n\r\n', (g) => g.includes('lane GET /a'))
  assert.match(got, /^HTTP\/1\.1 200 OK\r\n/)
  assert.match(got, /\r\nx-by: lane\r\nContent-Length: 11\r\nDate: .+ GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=0\r\n\r\n/)
  const again = await exchange('GET /b HTTP/1.1\r\nhost: x\r\n\r\n', (g) => g.includes('lane GET /b'), s)
  assert.match(again.got, /x-by: lane/)
  s.destroy()
})

test('a long head (past 32 header lines) and a head split across reads keep their url and every header', async () => {
  const many = Array.from({ length: 40 }, (_, i) => `x-h${i}: ${i}\r\n`).join('')
  const { got, s } = await exchange(`GET /long?q=1 HTTP/1.1\r\nhost: x\r\n${many}\r\n`, (g) => g.includes('lane GET /long?q=1'))
  assert.match(got, /lane GET \/long\?q=1$/)
  assert.equal(headersSeen.at(-1), 41)
  s.write('GET /spl')
  await new Promise((r) => setTimeout(r, 20))
  const split = await exchange('it HTTP/1.1\r\nhost: x\r\n\r\n', (g) => g.includes('lane GET /split'), s)
  assert.match(split.got, /lane GET \/split$/)
  s.destroy()
})

test('pipelined requests are answered in order, also when the first answers last', async () => {
  const s = connect(port, '127.0.0.1')
  const got = exchange(
    'GET /later/1 HTTP/1.1\r\nhost: x\r\n\r\nGET /2 HTTP/1.1\r\nhost: x\r\n\r\nGET /3 HTTP/1.1\r\nhost: x\r\n\r\n',
    (g) => g.includes('/3'),
    s,
  )
  ;(await heldRequest()).answer(200, [], 'first')
  const { got: text } = await got
  assert.ok(text.indexOf('first') < text.indexOf('lane GET /2'))
  assert.ok(text.indexOf('lane GET /2') < text.indexOf('lane GET /3'))
  s.destroy()
})

test('a request with a body goes to node:http with what follows it, on the same connection', async () => {
  const { got, s } = await exchange(
    [
      'GET /a HTTP/1.1\r\nhost: x\r\n\r\n',
      'POST /p HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nhelloGET /after HTTP/1.1\r\nhost: x\r\n\r\n',
    ],
    (g) => g.includes('node GET /after'),
  )
  assert.match(got, /lane GET \/a/)
  assert.match(got, /x-by: node[\s\S]*node POST \/p hello/)
  s.destroy()
})

test('a request behind a pipelined one the lane answers later is handed over once that one is answered', async () => {
  const s = connect(port, '127.0.0.1')
  const got = exchange(
    'GET /later/x HTTP/1.1\r\nhost: x\r\n\r\nGET /node/y HTTP/1.1\r\nhost: x\r\n\r\n',
    (g) => g.includes('node GET /node/y'),
    s,
  )
  ;(await heldRequest()).answer(200, [], 'held')
  const { got: text } = await got
  assert.ok(text.indexOf('held') < text.indexOf('node GET /node/y'))
  s.destroy()
})

test("a route that declines, HTTP/1.0, Expect, no Host and an upgrade are node:http's", async () => {
  for (const [req, want] of [
    ['GET /node/q HTTP/1.1\r\nhost: x\r\n\r\n', 'node GET /node/q'],
    ['GET /old HTTP/1.0\r\n\r\n', 'node GET /old'],
    ['POST /e HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: 2\r\n\r\nhi', 'node POST /e hi'],
    ['GET /nohost HTTP/1.1\r\n\r\n', 'HTTP/1.1 400 Bad Request'],
    ['GET /ws HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: x\r\n\r\n', 'upgraded /ws'],
  ] as const) {
    const { got, s } = await exchange(req, (g) => g.includes(want))
    assert.ok(got.includes(want), `${req}: ${got}`)
    s.destroy()
  }
})

test('a malformed request and a too-long head go to clientError; a slow head gets a 408', async () => {
  clientErrors = []
  const bad = await exchange('GET /a HTTP/1.1\r\nhost: x\r\nbad header\r\n\r\n', (g) => g.includes('\r\n\r\n'))
  assert.match(bad.got, /^HTTP\/1\.1 400/)
  const long = await exchange(`GET /a HTTP/1.1\r\nhost: x\r\nx: ${'a'.repeat(2000)}\r\n\r\n`, (g) => g.includes('\r\n\r\n'))
  assert.match(long.got, /^HTTP\/1\.1 400/)
  const slow = await exchange('GET /slow HTTP/1.1\r\nhost: x\r\nx: 1\r\n', (g) => g.includes('\r\n\r\n'))
  assert.match(slow.got, /^HTTP\/1\.1 408/)
  assert.deepEqual(clientErrors, ['HPE_INVALID_HEADER_TOKEN', 'HPE_HEADER_OVERFLOW', 'ERR_HTTP_REQUEST_TIMEOUT'])
})

test("an idle connection closes after the keep-alive time; Connection: close closes it after the answer; the client's end drops what is not answered yet", async () => {
  const idle = connect(port, '127.0.0.1')
  await once(idle, 'connect')
  await once(idle, 'close')
  const { got } = await exchange('GET /c HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n', () => false)
  assert.match(got, /Connection: close\r\n\r\nlane GET \/c$/)
  const s = connect(port, '127.0.0.1')
  s.end('GET /end HTTP/1.1\r\nhost: x\r\n\r\n')
  const { got: ended } = await exchange([], () => false, s)
  assert.match(ended, /lane GET \/end$/)
  // As node:http: a request still being answered when the client ends its side is dropped.
  const gone = connect(port, '127.0.0.1')
  gone.end('GET /later/gone HTTP/1.1\r\nhost: x\r\n\r\n')
  const { got: nothing } = await exchange([], () => false, gone)
  assert.equal(nothing, '')
  const dropped = later.pop()!
  assert.equal(dropped.url, '/later/gone')
  assert.equal(dropped.closed, true)
})

test('shutdown: an idle connection is closed, a busy one answers with Connection: close', async () => {
  const busy = connect(port, '127.0.0.1')
  const got = exchange('GET /later/z HTTP/1.1\r\nhost: x\r\n\r\n', () => false, busy)
  const idle = connect(port, '127.0.0.1')
  await once(idle, 'connect')
  const held = await heldRequest()
  const closed = once(idle, 'close')
  lane.close(false)
  await closed
  held.answer(200, [], 'last')
  const { got: text } = await got
  assert.match(text, /Connection: close\r\n\r\nlast$/)
  assert.equal(count(text, 'HTTP/1.1'), 1)
})

/**
 * A client-lane exchange writing to a real socket: the backend's head with
 * the connection's lines and Date, a body of unknown length chunked, HEAD
 * and 204 without a body, a large chunk as it is, the gateway's own answers
 * (a length added only where missing), a refused reason phrase, the 502 and
 * 504 before anything was sent and the cut response after, 'close' once.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import { after, before, test } from 'node:test'
import { LaneExchange, type LaneOwner } from '../../../src/http/lane-exchange.js'
import { createLogger } from '../../../src/observe/logger.js'

let server: Server
let port = 0
const accepted: Socket[] = []

before(async () => {
  server = createServer((s) => void accepted.push(s))
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  port = (server.address() as AddressInfo).port
})

after(() => server.close())

/** An exchange on a fresh connection, what the client reads until the gateway side closes, and the exchanges finished. */
async function pair(
  method = 'GET',
): Promise<{ x: LaneExchange; read: () => Promise<string>; finished: LaneExchange[]; logged: { status: number; msg: string }[] }> {
  const client = connect(port, '127.0.0.1')
  await once(server, 'connection')
  const socket = accepted.pop()!
  const finished: LaneExchange[] = []
  const logged: { status: number; msg: string }[] = []
  const log = createLogger('silent')
  log.error = ((o: { status: number }, msg: string) => void logged.push({ status: o.status, msg })) as typeof log.error
  const owner: LaneOwner = {
    socket,
    log,
    connectionLines: () => 'Connection: keep-alive\r\n',
    finished: (x) => {
      finished.push(x)
      socket.end()
    },
  }
  let got = ''
  client.on('data', (d: Buffer) => (got += d.toString('latin1')))
  client.on('error', () => undefined)
  const closed = once(client, 'close')
  const read = async (): Promise<string> => {
    await closed
    return got
  }
  return { x: new LaneExchange(owner, method, '/p', ['host', 'x'], socket), read, finished, logged }
}

test('a head with a Content-Length and a small body: the head, Date, the connection lines, the body', async () => {
  const { x, read, finished } = await pair()
  let closes = 0
  x.on('close', function (this: LaneExchange) {
    assert.equal(this, x)
    closes++
  })
  x.head(200, 'OK', ['content-length', '2', 'x-a', '1'])
  x.body(Buffer.from('hi'))
  x.end()
  x.end()
  const got = await read()
  assert.match(got, /^HTTP\/1\.1 200 OK\r\ncontent-length: 2\r\nx-a: 1\r\nDate: .+ GMT\r\nConnection: keep-alive\r\n\r\nhi$/)
  assert.equal(closes, 1)
  assert.deepEqual(finished, [x])
})

test('no Content-Length: chunked, each chunk framed, the terminator at the end; a large chunk passes as it is', async () => {
  const { x, read } = await pair()
  x.head(200, 'OK', ['date', 'then'])
  x.body(Buffer.from('ab'))
  x.body(Buffer.alloc(20_000, 'z'))
  x.flush()
  x.end()
  const got = await read()
  assert.match(
    got,
    /^HTTP\/1\.1 200 OK\r\ndate: then\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n2\r\nab\r\n4e20\r\nz{20000}\r\n0\r\n\r\n$/,
  )
})

test('HEAD and 204 have no body and no chunked framing', async () => {
  for (const [method, status] of [
    ['HEAD', 200],
    ['GET', 204],
  ] as const) {
    const { x, read } = await pair(method)
    x.head(status, 'X', [])
    x.end()
    const got = await read()
    assert.doesNotMatch(got, /chunked/)
    assert.match(got, /\r\n\r\n$/)
  }
})

test("the gateway's own answer gets a Content-Length unless it has one", async () => {
  const a = await pair()
  a.x.answer(429, ['content-type', 'application/json'], '{"e":1}')
  assert.match(await a.read(), /^HTTP\/1\.1 429 Too Many Requests\r\ncontent-type: application\/json\r\nContent-Length: 7\r\nDate: /)
  const b = await pair()
  b.x.answer(429, ['content-length', '2'], 'no')
  const got = await b.read()
  assert.equal(got.match(/content-length/gi)?.length, 1)
})

test('a reason phrase node:http would refuse is refused; a backend failure before anything was sent is a 502 or 504', async () => {
  const a = await pair()
  const statuses: number[] = []
  a.x.onStatus = (s) => statuses.push(s)
  assert.throws(() => a.x.head(200, 'O\x01K', []), { code: 'ERR_INVALID_CHAR' })
  a.x.error(Object.assign(new Error('bad'), { code: 'ERR_INVALID_CHAR' }))
  assert.match(await a.read(), /^HTTP\/1\.1 502 Bad Gateway\r\n[\s\S]*\{"error":"bad_gateway","status":502\}$/)
  assert.deepEqual(statuses, [200])
  const b = await pair()
  b.x.onStatus = (s) => statuses.push(s)
  b.x.error(Object.assign(new Error('slow'), { code: 'UND_ERR_HEADERS_TIMEOUT' }))
  assert.match(await b.read(), /^HTTP\/1\.1 504 Gateway Timeout\r\n[\s\S]*"backend_timeout"/)
  assert.deepEqual(statuses, [200, 504])
})

test('a backend failure after the head: the response is cut (the connection closes), logged with its status, the exchange closed', async () => {
  const { x, read, finished, logged } = await pair()
  x.head(200, 'OK', ['content-length', '10'])
  x.body(Buffer.from('part'))
  x.flush()
  x.error(Object.assign(new Error('lost'), { code: 'UND_ERR_SOCKET' }))
  const got = await read()
  assert.match(got, /\r\n\r\npart$/)
  assert.equal(x.closed, true)
  assert.deepEqual(finished, [x])
  assert.deepEqual(logged, [{ status: 200, msg: 'response aborted: backend connection lost mid-body' }])
})

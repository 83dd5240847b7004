/**
 * Node's own parser consuming a real socket: what the backend sends reaches
 * the parser's callbacks without a 'data' event, and pausing stops the
 * socket's handle until it is resumed.
 */
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { type AddressInfo, connect, createServer } from 'node:net'
import { test } from 'node:test'
import { consume, HTTPParser, pauseReading, type RawSocket, resumeReading } from '../../../src/http/node-parser.js'

test('a consumed socket is parsed in C++ and can be paused and resumed', async () => {
  const server = createServer((s) => {
    s.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhel')
    s.once('data', () => s.write('lo'))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1') as RawSocket
  const p = new HTTPParser()
  p.initialize(HTTPParser.RESPONSE, {}, 0, 0)
  const got: string[] = []
  let dataEvents = 0
  const done = new Promise<void>((resolve) => {
    p[HTTPParser.kOnHeadersComplete] = (_a: number, _b: number, h: string[], _c: unknown, _d: unknown, status: number) => {
      got.push(String(status), ...h)
      return 0
    }
    p[HTTPParser.kOnBody] = (chunk: Buffer) => void got.push(chunk.toString())
    p[HTTPParser.kOnMessageComplete] = () => resolve()
  })
  let reads = 0
  const firstRead = new Promise<void>((resolve) => {
    p[HTTPParser.kOnExecute] = () => {
      reads++
      resolve()
    }
  })
  socket.on('data', () => dataEvents++)
  await once(socket, 'connect')
  assert.equal(consume(p, socket), true)
  await firstRead
  pauseReading(socket)
  assert.equal(socket._handle?.reading, false)
  socket.write('more') // the backend answers with the rest, which waits in the kernel while paused
  resumeReading(socket)
  assert.equal(socket._handle?.reading, true)
  await done
  assert.deepEqual(got, ['200', 'content-length', '5', 'hel', 'lo'])
  assert.equal(dataEvents, 0)
  assert.ok(reads >= 2)
  p.unconsume()
  p.free()
  socket.destroy()
  server.close()
})

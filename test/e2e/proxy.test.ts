/**
 * Reverse proxy behaviour through the real gateway process and a real
 * backend on port 0: methods, path+query, bodies and headers intact,
 * X-Forwarded-*, hop-by-hop removal both ways, Set-Cookie, 502/504, client
 * abort, WebSocket upgrades, and one connection's pipelined requests through
 * the client lane and node:http. The bundle has no policies, so every request
 * is allowed and only the proxy is under test.
 */
import assert from 'node:assert/strict'
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { once } from 'node:events'
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { WebSocket, WebSocketServer } from 'ws'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

function emptyBundle(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'fv-proxy-')), 'bundle.json')
  writeFileSync(file, JSON.stringify({ bundle_version: 1, policies: [] }))
  return file
}

interface Reply {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
}

/** One request with exactly the given headers (no agent, so nothing is pooled between tests). */
function send(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string | string[]> = {},
  body?: Buffer | string,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

interface Seen {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body: Buffer
}

/** A closed port: bind port 0, note it, close it. */
async function closedPort(): Promise<number> {
  const s = createNetServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as AddressInfo).port
  await new Promise<void>((r) => s.close(() => r()))
  return port
}

describe('reverse proxy', { timeout: 60_000 }, () => {
  let backend: Backend
  let gw: GatewayProcess
  const seen: Seen[] = []
  /** Per-path behaviour of the backend; default echoes a summary. */
  const special = new Map<string, (req: IncomingMessage, res: ServerResponse) => void>()

  before(async () => {
    backend = await startBackend((req, res) => {
      const path = (req.url ?? '/').split('?')[0]!
      const fn = special.get(path)
      if (fn) return fn(req, res)
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) })
        res.setHeader('x-backend', 'yes')
        res.end(req.method === 'HEAD' ? undefined : `echo ${req.method}`)
      })
    })
    const wss = new WebSocketServer({ server: backend.server })
    wss.on('connection', (ws, req) => {
      ws.on('message', (data, isBinary) => ws.send(isBinary ? data : `echo:${data.toString()}:${req.url}`, { binary: isBinary }))
    })
    gw = await startGateway({
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: emptyBundle(),
      FAIRVISOR_UPSTREAM_TIMEOUT_MS: '800',
    })
  })

  after(async () => {
    const code = await gw?.stop()
    await backend?.close()
    assert.equal(code, 0)
  })

  for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
    test(`${method} keeps method, path+query, body and headers`, async () => {
      const path = `/a/b%20c/${method.toLowerCase()}?x=1&y=%2F&z&x=2`
      const withBody = method !== 'GET' && method !== 'HEAD'
      const body = withBody ? Buffer.from(`{"payload":"${method}","n":[1,2,3]}`) : undefined
      const headers: Record<string, string> = { 'x-custom': 'v1', 'x-multi': 'a, b', accept: 'application/json', 'user-agent': 'fv-e2e/1' }
      if (body) {
        headers['content-type'] = 'application/json'
        // node's client sends no length for DELETE/OPTIONS bodies on its own.
        headers['content-length'] = String(body.length)
      }
      const before = seen.length
      const r = await send(gw.url, method, path, headers, body)
      assert.equal(r.status, 200)
      assert.equal(r.headers['x-backend'], 'yes')
      if (method === 'HEAD') assert.equal(r.body.length, 0)
      else assert.equal(r.body.toString(), `echo ${method}`)
      assert.equal(seen.length, before + 1)
      const s = seen.at(-1)!
      assert.equal(s.method, method)
      assert.equal(s.url, path)
      assert.equal(s.headers['x-custom'], 'v1')
      assert.equal(s.headers['x-multi'], 'a, b')
      assert.equal(s.headers.accept, 'application/json')
      assert.equal(s.headers['user-agent'], 'fv-e2e/1')
      if (body) {
        assert.deepEqual(s.body, body)
        assert.equal(s.headers['content-type'], 'application/json')
      } else {
        assert.equal(s.body.length, 0)
      }
    })
  }

  test('one connection: pipelined requests answered in order, the lane handing over at a body, a chunked answer framed', async () => {
    special.set('/lane-chunked', (_req, res) => {
      res.write('part one, ')
      setTimeout(() => res.end('part two'), 10)
    })
    const s = connect(Number(new URL(gw.url).port), '127.0.0.1')
    let got = ''
    s.on('data', (d: Buffer) => (got += d.toString('latin1')))
    const h = 'host: gw\r\n'
    s.write(`GET /p1 HTTP/1.1\r\n${h}\r\nGET /lane-chunked HTTP/1.1\r\n${h}\r\nGET /p2 HTTP/1.1\r\n${h}\r\n`)
    s.write(`POST /p3 HTTP/1.1\r\n${h}content-length: 4\r\n\r\nbodyGET /p4 HTTP/1.1\r\n${h}connection: close\r\n\r\n`)
    await once(s, 'close')
    const answers = got.split(/(?=HTTP\/1\.1 )/)
    assert.equal(answers.length, 5, got)
    assert.match(answers[0]!, /\r\n\r\necho GET$/)
    assert.match(answers[1]!, /transfer-encoding: chunked\r\n[\s\S]*\r\n\r\na\r\npart one, \r\n8\r\npart two\r\n0\r\n\r\n$/i)
    assert.match(answers[2]!, /\r\n\r\necho GET$/)
    assert.match(answers[3]!, /\r\n\r\necho POST$/)
    assert.match(answers[4]!, /connection: close\r\n[\s\S]*\r\necho GET$/i)
    // node:http forwards the pipelined requests it took over at once: the backend may see them in either order.
    assert.deepEqual(
      seen
        .slice(-4)
        .map((x) => `${x.method} ${x.url} ${x.body.toString()}`)
        .sort(),
      ['GET /p1 ', 'GET /p2 ', 'GET /p4 ', 'POST /p3 body'],
    )
  })

  test('pipelined Expect: 100-continue requests answered before their turn: each 100 Continue before its head, not inside its answer', async () => {
    // The first answer is held until the gateway has read the two others' answers from the backend (they close
    // their backend connections: the gateway closes them once it has the whole answer), so node:http gets
    // their heads while their turn has not come and their 100 Continue still waits in their queue.
    let release!: () => void
    const bothRead = new Promise<void>((resolve) => {
      let n = 0
      release = () => void (++n === 2 && resolve())
    })
    special.set('/hold-first', (req, res) => {
      req.resume()
      void bothRead.then(() => res.end('first'))
    })
    const closing = (req: IncomingMessage): void => {
      req.resume()
      req.on('end', () => {
        const text = `answer ${req.method}`
        req.socket.once('end', () => {
          req.socket.destroy()
          release()
        })
        req.socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${text.length}\r\nconnection: close\r\n\r\n${text}`)
      })
    }
    special.set('/expect-get', closing) // no body: the gateway's own upstream pool (direct-forwarding.ts)
    special.set('/expect-post', closing) // a body: undici (forwarding.ts)
    const s = connect(Number(new URL(gw.url).port), '127.0.0.1')
    let got = ''
    s.on('data', (d: Buffer) => (got += d.toString('latin1')))
    const h = 'host: gw\r\n'
    s.write(
      `POST /hold-first HTTP/1.1\r\n${h}content-length: 4\r\n\r\nbody` +
        `GET /expect-get HTTP/1.1\r\n${h}expect: 100-continue\r\n\r\n` +
        `POST /expect-post HTTP/1.1\r\n${h}expect: 100-continue\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello`,
    )
    await once(s, 'close')
    const answers = got.split(/(?=HTTP\/1\.1 )/).map((a) => a.replace(/^(HTTP\/1\.1 200 OK)\r\n[\s\S]*?\r\n\r\n/, '$1 | '))
    assert.deepEqual(
      answers,
      [
        'HTTP/1.1 200 OK | first',
        'HTTP/1.1 100 Continue\r\n\r\n',
        'HTTP/1.1 200 OK | answer GET',
        'HTTP/1.1 100 Continue\r\n\r\n',
        'HTTP/1.1 200 OK | answer POST',
      ],
      got,
    )
  })

  test('a chunked request body of unknown length arrives whole', async () => {
    const r = await new Promise<Reply>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/chunked`, { method: 'POST', agent: false }, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }))
      })
      req.on('error', reject)
      req.write('part one|')
      setTimeout(() => req.end('part two'), 50)
    })
    assert.equal(r.status, 200)
    const s = seen.at(-1)!
    assert.equal(s.url, '/chunked')
    assert.equal(s.body.toString(), 'part one|part two')
  })

  test('Host is passed through and X-Forwarded-For/-Proto/-Host are set', async () => {
    await send(gw.url, 'GET', '/fwd', { host: 'api.example.test:8443', 'x-forwarded-for': '203.0.113.9' })
    const s = seen.at(-1)!
    assert.equal(s.headers.host, 'api.example.test:8443')
    // 127.0.0.1 is not a trusted proxy: its claim is kept but the real peer is appended.
    assert.equal(s.headers['x-forwarded-for'], '203.0.113.9, 127.0.0.1')
    assert.equal(s.headers['x-forwarded-proto'], 'http')
    assert.equal(s.headers['x-forwarded-host'], 'api.example.test:8443')

    await send(gw.url, 'GET', '/fwd2', { host: 'plain.test', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.test' })
    const t = seen.at(-1)!
    assert.equal(t.headers['x-forwarded-for'], '127.0.0.1')
    // An untrusted peer cannot claim another scheme or host.
    assert.equal(t.headers['x-forwarded-proto'], 'http')
    assert.equal(t.headers['x-forwarded-host'], 'plain.test')
  })

  test('hop-by-hop request headers are removed, including those named in Connection', async () => {
    await send(gw.url, 'GET', '/hop', {
      connection: 'keep-alive, X-Hop-One, x-hop-two',
      'keep-alive': 'timeout=5',
      te: 'trailers',
      upgrade: 'h2c',
      'proxy-authorization': 'Basic Zm9vOmJhcg==',
      'proxy-connection': 'keep-alive',
      'x-hop-one': '1',
      'x-hop-two': '2',
      'x-end-to-end': 'kept',
    })
    const s = seen.at(-1)!
    assert.equal(s.url, '/hop')
    for (const h of ['keep-alive', 'te', 'upgrade', 'proxy-authorization', 'proxy-connection', 'x-hop-one', 'x-hop-two']) {
      assert.equal(s.headers[h], undefined, `${h} must not reach the backend`)
    }
    assert.ok(!/hop/i.test(String(s.headers.connection ?? '')), `connection at backend: ${s.headers.connection}`)
    assert.equal(s.headers['x-end-to-end'], 'kept')
  })

  test('hop-by-hop response headers are removed, including those named in Connection', async () => {
    special.set('/hop-res', (_req, res) => {
      res.setHeader('connection', 'keep-alive, X-Backend-Hop')
      res.setHeader('keep-alive', 'timeout=99, max=7')
      res.setHeader('x-backend-hop', 'secret')
      res.setHeader('proxy-authenticate', 'Basic realm="backend"')
      res.setHeader('upgrade', 'h2c')
      res.setHeader('te', 'trailers')
      res.setHeader('x-end-to-end', 'kept')
      res.end('hop')
    })
    const r = await send(gw.url, 'GET', '/hop-res')
    assert.equal(r.status, 200)
    assert.equal(r.body.toString(), 'hop')
    assert.equal(r.headers['x-backend-hop'], undefined)
    assert.equal(r.headers['proxy-authenticate'], undefined)
    assert.equal(r.headers.upgrade, undefined)
    assert.equal(r.headers.te, undefined)
    // The gateway's own connection management may add Connection/Keep-Alive, never the backend's.
    assert.ok(!/hop/i.test(String(r.headers.connection ?? '')), `connection at client: ${r.headers.connection}`)
    assert.notEqual(r.headers['keep-alive'], 'timeout=99, max=7')
    assert.equal(r.headers['x-end-to-end'], 'kept')
  })

  test('status, reason and three Set-Cookie headers come back unchanged', async () => {
    const cookies = ['a=1; Path=/; HttpOnly', 'b=2; Max-Age=60; Secure', 'c=3, with comma; SameSite=Lax']
    special.set('/cookies', (_req, res) => {
      res.statusCode = 201
      res.statusMessage = 'Made It'
      res.setHeader('set-cookie', cookies)
      res.end('cookies')
    })
    const raw = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/cookies`, { agent: false }, resolve)
      req.on('error', reject)
      req.end()
    })
    raw.resume()
    assert.equal(raw.statusCode, 201)
    assert.equal(raw.statusMessage, 'Made It')
    assert.deepEqual(raw.headers['set-cookie'], cookies)
  })

  test('response headers keep the backend order (a repeated name with all its values, at its first place), names in lower case', async () => {
    special.set('/names', (_req, res) => {
      res.writeHead(200, ['X-Zeta', 'z', 'Content-Type', 'text/plain', 'X-Multi', 'one', 'X-Alpha', 'a', 'X-Multi', 'two'])
      res.end('names')
    })
    const raw = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/names`, { agent: false }, resolve)
      req.on('error', reject)
      req.end()
    })
    raw.resume()
    const names = raw.rawHeaders.filter((_, i) => i % 2 === 0)
    const own = names.filter((n) => n.startsWith('x-') || n === 'content-type')
    assert.deepEqual(own, ['x-zeta', 'content-type', 'x-multi', 'x-multi', 'x-alpha'])
    assert.deepEqual(raw.headersDistinct['x-multi'], ['one', 'two'])
  })

  test('a reason phrase with a control character, which Node cannot send on, gives 502 (the gateway lives on)', async () => {
    // llhttp lets it pass; the head the proxy stores itself (direct-forwarding.ts) must not relay it.
    special.set('/bad-reason', (_req, res) => void res.socket!.end('HTTP/1.1 200 O\x01K\r\ncontent-length: 2\r\n\r\nok', 'latin1'))
    // Once on the proxy's own pool (no body), once on undici (a body); the gateway's own 502 had kept the reason and thrown.
    for (const body of [undefined, 'abc']) {
      const r = await send(gw.url, body === undefined ? 'GET' : 'POST', '/bad-reason', {}, body)
      assert.equal(r.status, 502)
      assert.deepEqual(JSON.parse(r.body.toString()), { error: 'bad_gateway', status: 502 })
    }
  })

  test('a backend that resets the connection mid-request gives 502 with a JSON body and an error log line', async () => {
    special.set('/reset', (req) => req.socket.destroy())
    const r = await send(gw.url, 'POST', '/reset', { 'content-type': 'text/plain' }, 'x'.repeat(1000))
    assert.equal(r.status, 502)
    assert.match(String(r.headers['content-type']), /application\/json/)
    assert.ok(r.body.length < 200)
    assert.deepEqual(JSON.parse(r.body.toString()), { error: 'bad_gateway', status: 502 })
    const line = await gw.waitForLog((l) => l.level === 'error' && l.path === '/reset')
    assert.equal(line.status, 502)
  })

  test('a backend slower than FAIRVISOR_UPSTREAM_TIMEOUT_MS gives 504 with a JSON body and an error log line', async () => {
    let closed = false
    special.set('/slow', (_req, res) => {
      const t = setTimeout(() => res.end('too late'), 3000)
      res.on('close', () => {
        closed = true
        clearTimeout(t)
      })
    })
    const start = Date.now()
    const r = await send(gw.url, 'GET', '/slow')
    const took = Date.now() - start
    assert.equal(r.status, 504)
    // undici's timers are coarse (a reused connection's timer may be refreshed
    // rather than restarted), so only bound it loosely: well after zero, well
    // before the backend would have answered.
    assert.ok(took >= 400 && took < 2500, `504 after ${took} ms, timeout is 800 ms`)
    assert.deepEqual(JSON.parse(r.body.toString()), { error: 'backend_timeout', status: 504 })
    const line = await gw.waitForLog((l) => l.level === 'error' && l.path === '/slow')
    assert.equal(line.status, 504)
    // The timed-out upstream request is not left hanging on the backend.
    for (let i = 0; i < 40 && !closed; i++) await new Promise((r) => setTimeout(r, 25))
    assert.ok(closed, 'backend request was not closed after the timeout')
  })

  test('a client that goes away before the response head cancels the upstream request', async () => {
    let arrived!: () => void
    const arrivedP = new Promise<void>((r) => (arrived = r))
    let closedAt = 0
    special.set('/hang', (_req, res) => {
      arrived()
      res.on('close', () => (closedAt = Date.now()))
    })
    const req = httpRequest(`${gw.url}/hang`, { agent: false })
    req.on('error', () => {})
    req.end()
    await arrivedP
    const abortedAt = Date.now()
    req.destroy()
    for (let i = 0; i < 40 && !closedAt; i++) await new Promise((r) => setTimeout(r, 25))
    assert.ok(closedAt > 0, 'backend never saw its request close')
    assert.ok(closedAt - abortedAt < 1000, `upstream closed ${closedAt - abortedAt} ms after the client left`)
  })

  test('a client that goes away mid-body cancels the streaming upstream response', async () => {
    let closed = false
    let written = 0
    special.set('/endless', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' })
      const chunk = Buffer.alloc(16 * 1024, 1)
      const pump = (): void => {
        while (!closed && res.write(chunk)) written += chunk.length
        if (!closed) res.once('drain', pump)
      }
      res.on('close', () => (closed = true))
      pump()
    })
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/endless`, { agent: false }, (res) => {
        let got = 0
        res.on('data', (c: Buffer) => {
          got += c.length
          if (got > 256 * 1024) {
            req.destroy()
            resolve()
          }
        })
      })
      req.on('error', () => {})
      req.on('close', () => resolve())
      req.end()
      setTimeout(() => reject(new Error('no body arrived')), 5000).unref()
    })
    for (let i = 0; i < 40 && !closed; i++) await new Promise((r) => setTimeout(r, 25))
    assert.ok(closed, 'backend kept streaming after the client left')
    const at = written
    await new Promise((r) => setTimeout(r, 200))
    assert.equal(written, at)
  })

  test('a WebSocket echo round trip works through the gateway', async () => {
    const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/ws/chat?room=1`)
    const messages: { data: string | Buffer; binary: boolean }[] = []
    const got = new Promise<void>((resolve, reject) => {
      ws.on('message', (data, isBinary) => {
        messages.push({ data: isBinary ? (data as Buffer) : data.toString(), binary: isBinary })
        if (messages.length === 2) resolve()
      })
      ws.on('error', reject)
    })
    await new Promise<void>((resolve, reject) => {
      ws.once('open', resolve)
      ws.once('error', reject)
    })
    ws.send('hello')
    ws.send(Buffer.from([0, 1, 2, 255]), { binary: true })
    await got
    assert.deepEqual(messages[0], { data: 'echo:hello:/ws/chat?room=1', binary: false })
    assert.deepEqual(messages[1], { data: Buffer.from([0, 1, 2, 255]), binary: true })
    await new Promise<void>((resolve) => {
      ws.once('close', () => resolve())
      ws.close()
    })
  })
})

describe('reverse proxy without a backend', { timeout: 20_000 }, () => {
  test('a backend that refuses the connection gives 502 with a JSON body and an error log line', async () => {
    const port = await closedPort()
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: `http://127.0.0.1:${port}`, FAIRVISOR_CONFIG_FILE: emptyBundle() })
    try {
      const r = await send(gw.url, 'GET', '/nobody-home')
      assert.equal(r.status, 502)
      assert.match(String(r.headers['content-type']), /application\/json/)
      assert.deepEqual(JSON.parse(r.body.toString()), { error: 'bad_gateway', status: 502 })
      const line = await gw.waitForLog((l) => l.level === 'error' && l.path === '/nobody-home')
      assert.equal(line.status, 502)
      assert.equal((line.err as { code?: string }).code, 'ECONNREFUSED')
    } finally {
      assert.equal(await gw.stop(), 0)
    }
  })
})

/**
 * Bodies stream through the gateway: 1 GiB up and 1 GiB down while the
 * gateway process's resident memory grows by less than 100 MB. Bodies are
 * generated on the fly and only counted at the other end, so neither side
 * of the test buffers them either.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'

const GIB = 1024 ** 3
const CHUNK = Buffer.alloc(64 * 1024, 0x61)
const RSS_LIMIT = 100 * 1024 * 1024

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  assert.ok(m, 'VmRSS not found')
  return Number(m[1]) * 1024
}

/** Samples the gateway's RSS every 50 ms until stopped; returns the peak growth over `base`. */
function sampleRss(pid: number, base: number): () => number {
  let peak = base
  const t = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 50)
  return () => {
    clearInterval(t)
    peak = Math.max(peak, rssBytes(pid))
    return peak - base
  }
}

/** Writes `total` bytes to `out` in CHUNK pieces, honouring backpressure. */
function pump(out: NodeJS.WritableStream & { destroyed?: boolean }, total: number, done: () => void): void {
  let left = total
  const go = (): void => {
    while (left > 0 && !out.destroyed) {
      const n = Math.min(left, CHUNK.length)
      left -= n
      const ok = out.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))
      if (left === 0) return done()
      if (!ok) return void out.once('drain', go)
    }
  }
  go()
}

describe('streaming through the gateway', { timeout: 120_000 }, () => {
  let backend: Backend
  let gw: GatewayProcess

  before(async () => {
    backend = await startBackend((req, res) => {
      if (req.url === '/upload') {
        let n = 0
        req.on('data', (c: Buffer) => (n += c.length))
        req.on('end', () => res.end(JSON.stringify({ received: n })))
        return
      }
      if (req.url === '/download') {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(GIB) })
        pump(res, GIB, () => res.end())
        return
      }
      res.end('ok')
    })
    const dir = mkdtempSync(join(tmpdir(), 'fv-stream-'))
    writeFileSync(join(dir, 'bundle.json'), JSON.stringify({ bundle_version: 1, policies: [] }))
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: join(dir, 'bundle.json') })
    // Warm up so the baseline includes the code paths and pool already in use.
    for (let i = 0; i < 20; i++) await fetch(`${gw.url}/warm`).then((r) => r.text())
  })

  after(async () => {
    const code = await gw?.stop()
    await backend?.close()
    assert.equal(code, 0)
  })

  test('a 1 GiB request body streams to the backend with bounded gateway memory', async (t) => {
    const base = rssBytes(gw.proc.pid!)
    const stop = sampleRss(gw.proc.pid!, base)
    const reply = await new Promise<string>((resolve, reject) => {
      const req = httpRequest(
        `${gw.url}/upload`,
        { method: 'POST', agent: false, headers: { 'content-type': 'application/octet-stream', 'content-length': String(GIB) } },
        (res) => {
          let text = ''
          res.setEncoding('utf8')
          res.on('data', (c: string) => (text += c))
          res.on('end', () => resolve(text))
        },
      )
      req.on('error', reject)
      pump(req, GIB, () => req.end())
    })
    const growth = stop()
    t.diagnostic(`gateway RSS growth ${(growth / 1e6).toFixed(1)} MB`)
    assert.deepEqual(JSON.parse(reply), { received: GIB })
    assert.ok(growth < RSS_LIMIT, `gateway RSS grew by ${(growth / 1e6).toFixed(1)} MB`)
  })

  test('a 1 GiB response body streams to the client with bounded gateway memory', async (t) => {
    const base = rssBytes(gw.proc.pid!)
    const stop = sampleRss(gw.proc.pid!, base)
    const got = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${gw.url}/download`, { agent: false }, (res) => {
        assert.equal(res.statusCode, 200)
        assert.equal(res.headers['content-length'], String(GIB))
        let n = 0
        res.on('data', (c: Buffer) => (n += c.length))
        res.on('end', () => resolve(n))
        res.on('error', reject)
      })
      req.on('error', reject)
      req.end()
    })
    const growth = stop()
    t.diagnostic(`gateway RSS growth ${(growth / 1e6).toFixed(1)} MB`)
    assert.equal(got, GIB)
    assert.ok(growth < RSS_LIMIT, `gateway RSS grew by ${(growth / 1e6).toFixed(1)} MB`)
  })
})

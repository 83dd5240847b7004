/**
 * The gateway process's life: bad settings stop it with exit code 2 and one
 * line naming the variable; health endpoints; server limits (header size);
 * the separate admin listener; graceful shutdown on SIGTERM/SIGINT.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { CLI, ROOT, startBackend, startGateway, type Backend } from '../helpers/processes.js'

const dir = mkdtempSync(join(tmpdir(), 'fv-lifecycle-'))
const BUNDLE = join(dir, 'bundle.json')
writeFileSync(BUNDLE, JSON.stringify({ bundle_version: 1, policies: [] }))

interface Reply {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

function get(url: string, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false, headers }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

/** Runs the CLI with exactly `env` (plus PATH) and collects its exit code and output. */
function runCli(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [CLI], { cwd: ROOT, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    p.stdout.on('data', (c: Buffer) => (stdout += c))
    p.stderr.on('data', (c: Buffer) => (stderr += c))
    const t = setTimeout(() => p.kill('SIGKILL'), 10_000)
    p.on('close', (code) => {
      clearTimeout(t)
      resolve({ code, stdout, stderr })
    })
  })
}

function connectRefused(port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1')
    s.on('connect', () => {
      s.destroy()
      resolve('connected')
    })
    s.on('error', (err: Error & { code?: string }) => resolve(err.code ?? err.message))
  })
}

describe('bad settings', { timeout: 30_000 }, () => {
  const cases: [string, Record<string, string>][] = [
    ['FAIRVISOR_PORT', { FAIRVISOR_PORT: 'abc', FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:3000' }],
    ['FAIRVISOR_MODE', { FAIRVISOR_MODE: 'bogus', FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:3000' }],
    ['FAIRVISOR_BACKEND_URL', { FAIRVISOR_PORT: '0' }],
    ['FAIRVISOR_BACKEND_URL', { FAIRVISOR_BACKEND_URL: 'ftp://127.0.0.1:21' }],
    ['FAIRVISOR_TRUSTED_PROXIES', { FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:3000', FAIRVISOR_TRUSTED_PROXIES: '10.0.0.0/33' }],
    ['FAIRVISOR_UPSTREAM_TIMEOUT_MS', { FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:3000', FAIRVISOR_UPSTREAM_TIMEOUT_MS: '-5' }],
    ['FAIRVISOR_LOG_LEVEL', { FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:3000', FAIRVISOR_LOG_LEVEL: 'loud' }],
  ]
  for (const [name, env] of cases) {
    test(`${JSON.stringify(env)} exits 2 with one stderr line naming ${name}`, async () => {
      const r = await runCli({ FAIRVISOR_HOST: '127.0.0.1', ...env })
      assert.equal(r.code, 2)
      const lines = r.stderr.split('\n').filter((l) => l.trim() !== '')
      assert.equal(lines.length, 1, `stderr: ${r.stderr}`)
      assert.match(lines[0]!, new RegExp(`\\b${name}\\b`))
      assert.equal(r.stdout, '', 'nothing is started, so nothing is logged')
    })
  }
})

describe('health endpoints and limits', { timeout: 30_000 }, () => {
  let backend: Backend

  before(async () => {
    backend = await startBackend((req, res) => res.end(`backend ${req.url}`))
  })
  after(() => backend.close())

  test('/livez answers ok and /readyz describes the loaded bundle', async () => {
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: BUNDLE })
    try {
      const live = await get(`${gw.url}/livez`)
      assert.equal(live.status, 200)
      assert.equal(live.body, 'ok')
      const ready = await get(`${gw.url}/readyz`)
      assert.equal(ready.status, 200)
      const body = JSON.parse(ready.body) as Record<string, unknown>
      assert.equal(body.status, 'ready')
      assert.equal(body.policy_version, 1)
      assert.equal(body.policy_hash, createHash('sha1').update(readFileSync(BUNDLE)).digest('base64'))
      assert.equal(typeof body.last_config_update, 'number')
      assert.equal(backend.count, 0, 'reserved paths are not proxied')
    } finally {
      assert.equal(await gw.stop(), 0)
    }
  })

  test('/readyz is 503 without FAIRVISOR_CONFIG_FILE, /livez still 200', async () => {
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url })
    try {
      const ready = await get(`${gw.url}/readyz`)
      assert.equal(ready.status, 503)
      const body = JSON.parse(ready.body) as Record<string, unknown>
      assert.equal(body.status, 'not_ready')
      assert.equal(body.reason, 'no_policy_loaded')
      assert.equal((await get(`${gw.url}/livez`)).status, 200)
    } finally {
      assert.equal(await gw.stop(), 0)
    }
  })

  test('a request head larger than FAIRVISOR_MAX_HEADER_SIZE gets 431', async () => {
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: BUNDLE, FAIRVISOR_MAX_HEADER_SIZE: '2048' })
    try {
      const small = await get(`${gw.url}/small`, { 'x-pad': 'a'.repeat(1000) })
      assert.equal(small.status, 200)
      assert.equal(small.body, 'backend /small')
      const big = await get(`${gw.url}/big`, { 'x-pad': 'a'.repeat(4000) })
      assert.equal(big.status, 431)
    } finally {
      assert.equal(await gw.stop(), 0)
    }
  })

  test('FAIRVISOR_ADMIN_PORT moves /livez /readyz /metrics to the admin listener', async () => {
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: BUNDLE, FAIRVISOR_ADMIN_PORT: '0' })
    try {
      assert.ok(gw.adminPort && gw.adminPort !== gw.port, `admin port ${gw.adminPort}`)
      const admin = `http://127.0.0.1:${gw.adminPort}`
      const live = await get(`${admin}/livez`)
      assert.equal(live.status, 200)
      assert.equal(live.body, 'ok')
      assert.equal((await get(`${admin}/readyz`)).status, 200)
      const metrics = await get(`${admin}/metrics`)
      assert.equal(metrics.status, 200)
      assert.match(metrics.body, /^fairvisor_/m)
      assert.equal((await get(`${admin}/anything`)).status, 404)
      // On the main listener the same paths are ordinary traffic for the backend.
      const before = backend.count
      const proxied = await get(`${gw.url}/livez`)
      assert.equal(proxied.status, 200)
      assert.equal(proxied.body, 'backend /livez')
      assert.equal((await get(`${gw.url}/metrics`)).body, 'backend /metrics')
      assert.equal(backend.count, before + 2)
    } finally {
      assert.equal(await gw.stop(), 0)
    }
  })
})

describe('graceful shutdown', { timeout: 30_000 }, () => {
  test('SIGTERM lets an in-flight slow request finish, refuses new connections and exits 0', async () => {
    let arrived!: () => void
    const arrivedP = new Promise<void>((r) => (arrived = r))
    const backend = await startBackend((_req, res) => {
      arrived()
      setTimeout(() => res.end('slow but complete'), 1500)
    })
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: BUNDLE })
    try {
      const start = Date.now()
      const inFlight = get(`${gw.url}/slow`)
      await arrivedP
      gw.proc.kill('SIGTERM')
      await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('shutting down'))
      assert.equal(await connectRefused(gw.port), 'ECONNREFUSED')
      const r = await inFlight
      assert.equal(r.status, 200)
      assert.equal(r.body, 'slow but complete')
      assert.ok(Date.now() - start >= 1400)
      assert.equal(await gw.exited, 0)
      await gw.waitForLog((l) => l.msg === 'shutdown complete')
    } finally {
      await gw.stop()
      await backend.close()
    }
  })

  test('SIGINT with nothing in flight exits 0 promptly', async () => {
    const backend = await startBackend()
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: BUNDLE })
    try {
      // An idle keep-alive client connection must not hold the shutdown open.
      const agentReply = await fetch(`${gw.url}/x`)
      assert.equal(agentReply.status, 200)
      await agentReply.text()
      const start = Date.now()
      assert.equal(await gw.stop('SIGINT'), 0)
      assert.ok(Date.now() - start < 3000, `exit took ${Date.now() - start} ms`)
    } finally {
      await backend.close()
    }
  })

  test('a connection that has sent nothing yet (a preconnected socket) does not hold SIGTERM open either', async () => {
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:9', FAIRVISOR_CONFIG_FILE: BUNDLE })
    const sock = connect(gw.port, '127.0.0.1')
    try {
      await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject))
      const closed = new Promise<void>((r) => sock.once('close', () => r()))
      sock.on('error', () => undefined)
      // Taken by the gateway, not only queued by the kernel (which refuses the queue when listening stops): a
      // later connection is accepted after it, and answered.
      assert.equal((await get(`${gw.url}/livez`)).status, 200)
      const start = Date.now()
      assert.equal(await gw.stop('SIGTERM'), 0)
      assert.ok(Date.now() - start < 3000, `exit took ${Date.now() - start} ms (the drain deadline is 25 s)`)
      await closed
    } finally {
      sock.destroy()
      await gw.stop('SIGKILL')
    }
  })
})

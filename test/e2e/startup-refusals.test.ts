/**
 * Operator mistakes that stop the start, through the real gateway process:
 * a listener that cannot listen (its port in use, two listeners on one port),
 * with one thread and with worker threads; a FAIRVISOR_* variable that is no
 * setting; trusted proxies that cover every address; a short debug session
 * secret. Each exits 2 with one stderr line naming the variable, and nothing
 * keeps serving. The variables Kubernetes defines for a service named
 * fairvisor are no mistake: the gateway starts beside them.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type AddressInfo, type Server } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { CLI, freePort, ROOT, startGateway } from '../helpers/processes.js'

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs the gateway with `env` until it exits; one still running after the (generous) deadline is killed, and its code is null. */
function run(env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [CLI], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        FAIRVISOR_HOST: '127.0.0.1',
        FAIRVISOR_PORT: '0',
        FAIRVISOR_WORKERS: '1',
        FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:9',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    p.stdout.on('data', (c: Buffer) => (stdout += c))
    p.stderr.on('data', (c: Buffer) => (stderr += c))
    const t = setTimeout(() => p.kill('SIGKILL'), 20_000)
    p.on('close', (code) => {
      clearTimeout(t)
      resolve({ code, stdout, stderr })
    })
  })
}

/** Exit 2, one stderr line naming `name` (and matching `also`), and no listener ever reported. */
function refused(r: Run, name: string, also?: RegExp): void {
  assert.equal(r.code, 2, `exit code (null: still running when killed); stderr: ${r.stderr}`)
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '')
  assert.equal(lines.length, 1, `stderr: ${r.stderr}`)
  assert.match(lines[0]!, new RegExp(`^fairvisor: invalid setting ${name}\\b`))
  if (also) assert.match(lines[0]!, also)
  assert.doesNotMatch(r.stdout, /listening/, 'nothing reported listening')
}

describe('a listener that cannot listen stops the start (exit 2, naming its setting)', { timeout: 120_000 }, () => {
  let busy: Server
  let port: number
  before(async () => {
    busy = createServer()
    busy.listen(0, '127.0.0.1')
    await once(busy, 'listening')
    port = (busy.address() as AddressInfo).port
  })
  after(() => busy.close())

  for (const workers of ['1', '2']) {
    test(`FAIRVISOR_ADMIN_PORT in use, FAIRVISOR_WORKERS=${workers}`, async () => {
      const r = await run({ FAIRVISOR_WORKERS: workers, FAIRVISOR_ADMIN_PORT: String(port) })
      refused(r, 'FAIRVISOR_ADMIN_PORT', new RegExp(`127\\.0\\.0\\.1:${port}.*EADDRINUSE`))
    })

    test(`FAIRVISOR_GRPC_PORT in use, FAIRVISOR_WORKERS=${workers}`, async () => {
      refused(await run({ FAIRVISOR_WORKERS: workers, FAIRVISOR_GRPC_PORT: String(port) }), 'FAIRVISOR_GRPC_PORT', /EADDRINUSE/)
    })

    test(`FAIRVISOR_GRPC_PORT equal to FAIRVISOR_PORT, FAIRVISOR_WORKERS=${workers}`, async () => {
      const same = String(await freePort())
      refused(
        await run({ FAIRVISOR_WORKERS: workers, FAIRVISOR_PORT: same, FAIRVISOR_GRPC_PORT: same }),
        'FAIRVISOR_GRPC_PORT',
        /FAIRVISOR_PORT/,
      )
    })
  }

  test('FAIRVISOR_ADMIN_PORT equal to FAIRVISOR_PORT', async () => {
    const same = String(await freePort())
    refused(await run({ FAIRVISOR_PORT: same, FAIRVISOR_ADMIN_PORT: same }), 'FAIRVISOR_ADMIN_PORT', /FAIRVISOR_PORT/)
  })

  test('decision-service mode: FAIRVISOR_ADMIN_PORT is bound too (in use: refused)', async () => {
    refused(await run({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_ADMIN_PORT: String(port) }), 'FAIRVISOR_ADMIN_PORT', /EADDRINUSE/)
  })
})

describe('decision-service mode serves the admin routes on FAIRVISOR_ADMIN_PORT', { timeout: 60_000 }, () => {
  for (const workers of ['1', '2']) {
    test(`FAIRVISOR_WORKERS=${workers}`, async () => {
      const gw = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_ADMIN_PORT: '0', FAIRVISOR_WORKERS: workers })
      try {
        assert.ok(gw.adminPort, 'the admin port is reported')
        assert.equal((await fetch(`http://127.0.0.1:${gw.adminPort}/livez`)).status, 200)
        assert.equal((await fetch(`${gw.url}/livez`)).status, 404, 'not on the public listener')
      } finally {
        assert.equal(await gw.stop(), 0)
      }
    })
  }
})

describe('settings refused at start (exit 2)', { timeout: 120_000 }, () => {
  test('an unknown FAIRVISOR_* variable, with the setting it is closest to', async () => {
    refused(await run({ FAIRVISOR_WORKER: '4' }), 'FAIRVISOR_WORKER', /did you mean FAIRVISOR_WORKERS\?/)
    refused(await run({ FAIRVISOR_TRUSTED_PROXY: '10.0.0.1' }), 'FAIRVISOR_TRUSTED_PROXY', /did you mean FAIRVISOR_TRUSTED_PROXIES\?/)
    refused(await run({ FAIRVISOR_SOMETHING_ELSE: '1' }), 'FAIRVISOR_SOMETHING_ELSE', /not a setting/)
    // With worker threads the supervisor refuses before any worker starts.
    refused(
      await run({ FAIRVISOR_WORKERS: '2', FAIRVISOR_ADMN_PORT: '9090' }),
      'FAIRVISOR_ADMN_PORT',
      /did you mean FAIRVISOR_ADMIN_PORT\?/,
    )
  })

  test('FAIRVISOR_TRUSTED_PROXIES covering every IPv4 or IPv6 address', async () => {
    for (const list of ['0.0.0.0/0', '::/0', '10.0.0.0/8, 0.0.0.0/0', '0.0.0.0/1,128.0.0.0/1', '::ffff:0:0/96'])
      refused(await run({ FAIRVISOR_TRUSTED_PROXIES: list }), 'FAIRVISOR_TRUSTED_PROXIES', /trusts every IPv[46] address/)
  })

  test('a FAIRVISOR_DEBUG_SESSION_SECRET shorter than 32 characters', async () => {
    refused(await run({ FAIRVISOR_DEBUG_SESSION_SECRET: 'x' }), 'FAIRVISOR_DEBUG_SESSION_SECRET', /at least 32/)
    refused(await run({ FAIRVISOR_DEBUG_SESSION_SECRET: 'a'.repeat(31) }), 'FAIRVISOR_DEBUG_SESSION_SECRET', /at least 32/)
  })
})

test('the variables of Kubernetes service links (a service named fairvisor, fairvisor-redis) are not refused', {
  timeout: 60_000,
}, async () => {
  const gw = await startGateway({
    FAIRVISOR_BACKEND_URL: 'http://127.0.0.1:9',
    FAIRVISOR_SERVICE_HOST: '10.96.0.10',
    FAIRVISOR_SERVICE_PORT: '80',
    FAIRVISOR_SERVICE_PORT_HTTP: '80',
    FAIRVISOR_PORT_80_TCP: 'tcp://10.96.0.10:80',
    FAIRVISOR_PORT_80_TCP_PROTO: 'tcp',
    FAIRVISOR_PORT_80_TCP_PORT: '80',
    FAIRVISOR_PORT_80_TCP_ADDR: '10.96.0.10',
    FAIRVISOR_REDIS_SERVICE_HOST: '10.96.0.11',
    FAIRVISOR_REDIS_PORT: 'tcp://10.96.0.11:6379',
    FAIRVISOR_TRUSTED_PROXIES: '10.0.0.0/8,fd00::/8',
    FAIRVISOR_DEBUG_SESSION_SECRET: 's'.repeat(32),
  })
  assert.equal(await gw.stop(), 0)
})

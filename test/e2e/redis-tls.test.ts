/**
 * FAIRVISOR_STORE=rediss://… end to end. This file owns a redis-server that
 * listens on TLS only (`--port 0`), with a certificate for
 * `IP:127.0.0.1, DNS:localhost` signed by a private CA made here with openssl.
 * - CA trusted (NODE_EXTRA_CA_CERTS): limiting is exact and the bucket lives
 *   on the TLS server (read back with `redis-cli --tls`), no warning on stderr.
 * - CA not trusted: `open` allows and stays ready, `closed` answers 503
 *   service_unavailable; the gateway neither spins nor floods its log while
 *   ioredis keeps retrying the handshake.
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Pool } from 'undici'
import { startBackend, startGateway, startGateways, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { writeHeaderBucketBundle } from '../helpers/bundles.js'
import { freePort, readBucket, sleep } from '../helpers/redis-servers.js'
import { testCa } from '../helpers/certs.js'

let redisProc: ChildProcess | undefined
process.on('exit', () => redisProc?.kill('SIGKILL'))

/** A private CA, a server cert for `IP:127.0.0.1, DNS:localhost`, and a second cert of the same key for another name only. */
function makeCerts(dir: string): { ca: string; cert: string; key: string; otherName: string } {
  const ca = testCa(dir)
  const server = ca.issue('server', 'IP:127.0.0.1,DNS:localhost')
  const other = ca.issue('other', 'DNS:elsewhere.invalid', 'server')
  return { ca: ca.ca, cert: server.cert, key: server.key, otherName: other.cert }
}

/** CPU time (user + system) of a process in ms, from /proc (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10
}

async function get(pool: Pool, path: string, user?: string): Promise<{ status: number; reason: string | undefined; body: string }> {
  const r = await pool.request({ path, method: 'GET', headers: user === undefined ? {} : { 'x-user': user } })
  return { status: r.statusCode, reason: r.headers['x-fairvisor-reason'] as string | undefined, body: await r.body.text() }
}

describe('redis over TLS (rediss://)', () => {
  let dir: string
  let ca: string
  let certs: ReturnType<typeof makeCerts>
  let bundle: string
  let backend: Backend
  let tlsPort: number
  const cli = (...args: string[]): string =>
    spawnSync('redis-cli', ['--tls', '--cacert', ca, '-h', '127.0.0.1', '-p', String(tlsPort), ...args], { encoding: 'utf8' }).stdout.trim()

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fv-redis-tls-'))
    certs = makeCerts(dir)
    ca = certs.ca
    bundle = writeHeaderBucketBundle(dir, 'per_user', { burst: 3, tokens_per_second: 0.01 })
    backend = await startBackend()
    tlsPort = await freePort()
    // --port 0: no plain-TCP listener, so anything the gateway stores went over TLS.
    redisProc = spawn(
      'redis-server',
      [
        '--port',
        '0',
        '--tls-port',
        String(tlsPort),
        '--bind',
        '127.0.0.1',
        '--tls-cert-file',
        certs.cert,
        '--tls-key-file',
        certs.key,
        '--tls-ca-cert-file',
        ca,
        '--tls-auth-clients',
        'no',
        '--save',
        '',
        '--appendonly',
        'no',
        '--daemonize',
        'no',
        '--dir',
        dir,
      ],
      { stdio: 'ignore' },
    )
    const end = Date.now() + 5000
    while (cli('ping') !== 'PONG') {
      if (Date.now() > end) throw new Error(`TLS redis-server on ${tlsPort} did not answer PING within 5 s`)
      await sleep(30)
    }
  })

  after(async () => {
    const p = redisProc
    if (p && p.exitCode === null && p.signalCode === null)
      await new Promise<void>((r) => {
        p.once('exit', () => r())
        p.kill('SIGKILL')
      })
    await backend?.close()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  const envFor = (policy: 'open' | 'closed', trustCa: boolean): Record<string, string> => ({
    FAIRVISOR_BACKEND_URL: backend.url,
    FAIRVISOR_CONFIG_FILE: bundle,
    FAIRVISOR_STORE: `rediss://127.0.0.1:${tlsPort}`,
    FAIRVISOR_FAIL_POLICY: policy,
    // Exactness is under test, not the deadline: a loaded machine must not turn a slow call into a grant.
    FAIRVISOR_REDIS_TIMEOUT_MS: '2000',
    ...(trustCa ? { NODE_EXTRA_CA_CERTS: ca } : {}),
  })

  /** A fail-closed gateway that trusts the CA, once connected to the TLS server, with one keep-alive connection to it. */
  async function connected(scenario: (gw: GatewayProcess, pool: Pool) => Promise<void>, cleanup?: () => void): Promise<void> {
    const gw = await startGateway(envFor('closed', true))
    const pool = new Pool(gw.url, { connections: 1 })
    try {
      await gw.waitForLog((l) => l.msg === 'redis store connected', 1000)
      await scenario(gw, pool)
    } finally {
      cleanup?.()
      await pool.close()
      await gw.stop()
    }
  }

  it('CA trusted: burst 3 → 3 × 200 then 429; the bucket and its TTL live on the TLS server', () =>
    connected(async (gw, pool) => {
      const before = backend.count
      const codes: number[] = []
      for (let i = 0; i < 4; i++) codes.push((await get(pool, '/tls', 'tls-alice')).status)
      assert.deepEqual(codes, [200, 200, 200, 429])
      assert.equal(backend.count - before, 3, 'the backend saw exactly the 3 allowed requests')

      const keys = cli('--scan').split('\n')
      assert.ok(keys.includes('tb:per_user:tls-alice'), `bucket key on the TLS server: ${JSON.stringify(keys)}`)
      const pttl = Number(cli('pttl', 'tb:per_user:tls-alice'))
      assert.ok(pttl > 0, `bucket has a TTL: ${pttl}`)
      assert.ok(readBucket(cli, 'tb:per_user:tls-alice')!.tokens < 1, 'bucket drained on the server')

      const ready = JSON.parse((await get(pool, '/readyz')).body) as { status: string; store: string }
      assert.deepEqual([ready.status, ready.store], ['ready', 'ok'])
      assert.deepEqual(
        gw.logs.filter((l) => l.level !== 'info'),
        [],
        'no warning or error logged',
      )
      // e.g. DEP0123 (TLS server name set to an IP address) or an unreadable NODE_EXTRA_CA_CERTS.
      assert.deepEqual(gw.stderr, [], 'nothing on stderr')
    }))

  it('certificate for another name (CA trusted): handshake refused, 503; right certificate back → limiting resumes', () =>
    connected(
      async (gw, pool) => {
        assert.equal((await get(pool, '/tls', 'name-check')).status, 200)
        // Redis loads a new certificate for new connections; dropping ours makes the gateway handshake again.
        assert.equal(cli('config', 'set', 'tls-cert-file', certs.otherName), 'OK')
        assert.match(cli('client', 'kill', 'type', 'normal'), /^[1-9]/)
        const e = await gw.waitForLog((l) => l.msg === 'redis store connection error', 2000)
        console.log(`wrong name: ${String(e.err)}`)
        assert.match(String(e.err), /altnames|127\.0\.0\.1/, `the server identity is checked against the IP: ${JSON.stringify(e)}`)
        const r = await get(pool, '/tls', 'name-check')
        assert.deepEqual([r.status, r.reason], [503, 'service_unavailable'])
        assert.equal(cli('config', 'set', 'tls-cert-file', certs.cert), 'OK')
        const connects = (): number => gw.logs.filter((l) => l.msg === 'redis store connected').length
        const end = Date.now() + 3000
        while (connects() < 2 && Date.now() < end) await sleep(20)
        assert.equal(connects(), 2, 'reconnected with the right certificate')
        const codes: number[] = []
        for (let i = 0; i < 3; i++) codes.push((await get(pool, '/tls', 'name-check')).status)
        assert.deepEqual(codes, [200, 200, 429], 'the bucket kept its first charge')
      },
      // The next test needs the right certificate even when this one fails half-way.
      () => assert.equal(cli('config', 'set', 'tls-cert-file', certs.cert), 'OK'),
    ))

  it('CA not trusted: open allows and stays ready, closed → 503 service_unavailable; no spin, no log flood', async () => {
    // Both start in parallel: each waits up to 3 s for the store before listening.
    const [open, closed] = (await startGateways([envFor('open', false), envFor('closed', false)])) as [GatewayProcess, GatewayProcess]
    const pools = [new Pool(open.url, { connections: 1 }), new Pool(closed.url, { connections: 1 })]
    const [po, pc] = pools as [Pool, Pool]
    try {
      for (const gw of [open, closed]) {
        const e = await gw.waitForLog((l) => l.msg === 'redis store connection error', 1000)
        assert.match(String(e.err), /certificate/i, `the handshake fails on the certificate: ${JSON.stringify(e)}`)
      }

      const before = backend.count
      for (let i = 0; i < 5; i++) {
        const o = await get(po, '/tls', 'untrusted')
        assert.equal(o.status, 200, `open: allowed: ${JSON.stringify(o)}`)
        const c = await get(pc, '/tls', 'untrusted')
        assert.deepEqual([c.status, c.reason], [503, 'service_unavailable'], `closed: ${JSON.stringify(c)}`)
      }
      assert.equal(backend.count - before, 5, 'only the open gateway reached the backend')
      const ro = await get(po, '/readyz')
      const readyOpen = JSON.parse(ro.body) as { status: string; store: string }
      assert.equal(ro.status, 200, ro.body)
      assert.equal(readyOpen.status, 'ready')
      assert.notEqual(readyOpen.store, 'ok', `open: readyz reports the store is not ok: ${ro.body}`)
      const rc = await get(pc, '/readyz')
      assert.deepEqual([rc.status, (JSON.parse(rc.body) as { reason: string }).reason], [503, 'store_unavailable'], rc.body)
      await open.waitForLog((l) => l.msg === 'store call failed', 1000)
      assert.match(
        await (await po.request({ path: '/metrics', method: 'GET' })).body.text(),
        /fairvisor_store_errors_total\{store="redis"\} [1-9]/,
      )

      // Traffic for 1 s and 51 requests at least (a loaded machine runs longer rather than fewer):
      // store failures are logged about once a second, not per request.
      const linesBefore = [open.logs.length, closed.logs.length]
      let sent = 0
      const t0 = Date.now()
      while (Date.now() - t0 < 1000 || sent <= 50) {
        await Promise.all([get(po, '/tls', `flood-${sent}`), get(pc, '/tls', `flood-${sent}`)])
        sent++
      }
      const trafficMs = Date.now() - t0
      for (const [i, gw] of [open, closed].entries()) {
        const lines = gw.logs.slice(linesBefore[i])
        const failed = lines.filter((l) => l.msg === 'store call failed')
        const detail = `${sent} requests in ${trafficMs} ms; ${lines.length} log lines: ${JSON.stringify(lines.slice(0, 5))}`
        assert.ok(sent > 50, `enough traffic: ${detail}`)
        assert.ok(failed.length <= Math.ceil(trafficMs / 1000) + 1, `store failures rate-limited: ${detail}`)
        assert.ok(lines.length <= failed.length + 1, `nothing else is logged per request: ${detail}`)
      }

      // Idle for 2 s while ioredis keeps retrying the handshake (every 100–500 ms):
      // the repeated connection error is not logged again, and the process does not spin.
      const idleLines = [open.logs.length, closed.logs.length]
      const cpu0 = [cpuMs(open.proc.pid!), cpuMs(closed.proc.pid!)]
      const i0 = Date.now()
      await sleep(2000)
      const idleMs = Date.now() - i0
      for (const [i, gw] of [open, closed].entries()) {
        const cpu = cpuMs(gw.proc.pid!) - cpu0[i]!
        const lines = gw.logs.slice(idleLines[i])
        console.log(
          `${i === 0 ? 'open' : 'closed'}: idle ${idleMs} ms → ${cpu} ms CPU, ${lines.length} log lines; connection-error lines in total: ${gw.logs.filter((l) => l.msg === 'redis store connection error').length}`,
        )
        assert.deepEqual(lines, [], 'no log line while idle')
        assert.ok(cpu < idleMs * 0.25, `no spin: ${cpu} ms CPU in ${idleMs} ms idle`)
        assert.ok(
          gw.logs.filter((l) => l.msg === 'redis store connection error').length <= 2,
          'the connection error is logged once, not per retry',
        )
      }
    } finally {
      await Promise.all(pools.map((p) => p.close()))
      await Promise.all([open.stop(), closed.stop()])
    }
  })
})

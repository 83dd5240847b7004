/**
 * The nginx auth_request snippet, run for real: the installed nginx
 * (one process, temp prefix) in front of a backend, asking the real gateway in
 * decision_service mode. Proves the error_page/auth_request_set mapping turns
 * the sidecar's 429 back into a 429 with its headers. Skipped loudly where
 * nginx is not installed.
 */
import assert from 'node:assert/strict'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { nginxConf, docsNginxBlock } from '../helpers/nginx.js'

const HAVE_NGINX = spawnSync('nginx', ['-v']).error === undefined
if (!HAVE_NGINX) console.error('\n\n*** nginx NOT INSTALLED: the nginx auth_request test is SKIPPED (apt-get install nginx) ***\n\n')

/** The ```nginx block between the markers of docs/integrations.md. */
function docsSnippet(): string {
  const block = docsNginxBlock('nginx-auth-request')
  assert.ok(block, 'docs/integrations.md has the nginx auth_request snippet between its markers')
  return block
}

const BUNDLE = {
  bundle_version: 1,
  policies: [
    {
      id: 'api',
      spec: {
        selector: { pathPrefix: '/api/' },
        rules: [
          {
            name: 'per_user',
            limit_keys: ['header:x-user'],
            algorithm: 'token_bucket',
            algorithm_config: { tokens_per_second: 0.01, burst: 2 },
          },
        ],
      },
    },
    {
      id: 'exact',
      spec: {
        selector: { pathExact: '/exact' },
        rules: [
          {
            name: 'per_ip',
            limit_keys: ['ip:address'],
            algorithm: 'token_bucket',
            algorithm_config: { tokens_per_second: 0.01, burst: 1 },
          },
        ],
      },
    },
  ],
}

describe('nginx auth_request in front of the decision service (docs/integrations.md snippet)', { skip: !HAVE_NGINX }, () => {
  let gw: GatewayProcess
  let backend: Backend
  let nginx: ChildProcess
  let url: string
  let nginxErr = ''

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fv-nginx-'))
    writeFileSync(join(dir, 'bundle.json'), JSON.stringify(BUNDLE))
    backend = await startBackend((req, res) => res.end(`backend saw ${req.url}`))
    // nginx is the trusted peer, so ip:address comes from the X-Forwarded-For it sends.
    gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_CONFIG_FILE: join(dir, 'bundle.json'),
      FAIRVISOR_TRUSTED_PROXIES: '127.0.0.1',
    })
    const port = await freePort()
    const server = docsSnippet()
      .replace('server 127.0.0.1:8080;', `server 127.0.0.1:${gw.port};`)
      .replace('server 127.0.0.1:3000;', `server 127.0.0.1:${backend.port};`)
      .replace('listen 80;', `listen 127.0.0.1:${port};`)
    assert.ok(server.includes(`127.0.0.1:${gw.port}`) && server.includes(`127.0.0.1:${port}`), 'placeholders replaced')
    const conf = nginxConf(dir, server)
    writeFileSync(join(dir, 'nginx.conf'), conf)
    const check = spawnSync('nginx', ['-t', '-p', dir, '-c', join(dir, 'nginx.conf')], { encoding: 'utf8' })
    assert.equal(check.status, 0, `nginx -t: ${check.stderr}`)
    nginx = spawn('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] })
    nginx.stderr!.on('data', (c: Buffer) => (nginxErr += c.toString()))
    url = `http://127.0.0.1:${port}`
    for (let i = 0; i < 50; i++) {
      try {
        await fetch(`${url}/ping`)
        break
      } catch {
        await sleep(100)
      }
    }
  })
  after(async () => {
    if (nginx && nginx.exitCode === null) {
      const exited = new Promise((r) => nginx.once('exit', r))
      nginx.kill('SIGQUIT')
      await exited
    }
    await gw?.stop()
    await backend?.close()
  })

  test('allowed requests reach the backend with the RateLimit headers', async () => {
    const r = await fetch(`${url}/api/orders?page=2`, { headers: { 'x-user': 'ann' } })
    assert.equal(r.status, 200, nginxErr)
    assert.equal(await r.text(), 'backend saw /api/orders?page=2')
    assert.equal(r.headers.get('ratelimit-limit'), '2')
    assert.equal(r.headers.get('ratelimit-remaining'), '1')
    assert.match(r.headers.get('ratelimit') ?? '', /^"api";r=1;t=\d+$/)
  })

  test('a reject is a 429 with Retry-After, RateLimit-* and the reason, and never reaches the backend', async () => {
    assert.equal((await fetch(`${url}/api/orders`, { headers: { 'x-user': 'ann' } })).status, 200)
    const seen = backend.count
    const r = await fetch(`${url}/api/orders`, { headers: { 'x-user': 'ann' } })
    assert.equal(r.status, 429)
    assert.deepEqual(await r.json(), { error: 'too_many_requests' })
    assert.match(r.headers.get('retry-after') ?? '', /^\d+$/)
    assert.ok(Number(r.headers.get('retry-after')) >= 100)
    assert.equal(r.headers.get('x-fairvisor-reason'), 'token_bucket_exceeded')
    assert.equal(r.headers.get('ratelimit-remaining'), '0')
    assert.equal(r.headers.get('ratelimit-limit'), '2')
    assert.equal(backend.count, seen, 'the backend was not called')
    // Another user still passes; a request no policy matches carries no RateLimit headers.
    assert.equal((await fetch(`${url}/api/orders`, { headers: { 'x-user': 'bea' } })).status, 200)
    const free = await fetch(`${url}/other`)
    assert.equal(free.status, 200)
    assert.equal(free.headers.get('ratelimit-limit'), null)
  })

  test('$request_uri with a query still matches pathExact; the client address comes through X-Forwarded-For', async () => {
    assert.equal((await fetch(`${url}/exact?a=1`, { headers: { 'x-forwarded-for': '203.0.113.7' } })).status, 200)
    assert.equal((await fetch(`${url}/exact?a=2`, { headers: { 'x-forwarded-for': '203.0.113.7' } })).status, 429)
    // A different client address has its own bucket, although every call comes from nginx.
    assert.equal((await fetch(`${url}/exact`, { headers: { 'x-forwarded-for': '203.0.113.8' } })).status, 200)
  })

  test('with the sidecar stopped, the snippet answers 503 (fail closed)', async () => {
    await gw.stop()
    const r = await fetch(`${url}/api/orders`, { headers: { 'x-user': 'cid' } })
    assert.equal(r.status, 503)
  })
})

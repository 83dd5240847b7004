/**
 * Spellings of a limited path that common backends route to it, sent on the
 * wire to the real gateway: as a reverse proxy, and as a decision service
 * behind the documented nginx auth_request block (the installed nginx). A
 * policy `pathExact /api/expensive` + `pathPrefix /api/expensive/` with a
 * burst of 1: once its token is spent, every spelling is counted (429), or,
 * for an escaped slash under the default FAIRVISOR_ENCODED_SLASHES=reject,
 * refused (400); none reaches the backend.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type NginxProcess, startDocsAuthRequest } from '../helpers/nginx.js'
import { type Backend, type GatewayProcess, startBackend, startGateway } from '../helpers/processes.js'

const HAVE_NGINX = spawnSync('nginx', ['-v']).error === undefined
if (!HAVE_NGINX) console.error('\n\n*** nginx NOT INSTALLED: the nginx auth_request path tests are SKIPPED (apt-get install nginx) ***\n\n')

/** Spellings every mode counts whatever FAIRVISOR_ENCODED_SLASHES says. */
const VARIANTS = ['/api/expensive#x', '/api\\expensive', '//h/api/expensive', '/api/expensive/', '/API/Expensive', '/api/expensive;x=1']
/** Escaped slashes: refused by default, counted with FAIRVISOR_ENCODED_SLASHES=decode. */
const ESCAPED = ['/api%2Fexpensive', '/x/..%2fapi/expensive']

const tb = { tokens_per_second: 0.001, burst: 1 }
const BUNDLE = {
  bundle_version: 1,
  policies: [
    {
      id: 'expensive',
      spec: {
        selector: { pathExact: '/api/expensive', pathPrefix: '/api/expensive/' },
        rules: [{ name: 'expensive', limit_keys: [], algorithm: 'token_bucket', algorithm_config: tb }],
      },
    },
    {
      id: 'admin',
      spec: {
        selector: { hosts: ['admin.example.com'], pathPrefix: '/' },
        rules: [{ name: 'admin', limit_keys: [], algorithm: 'token_bucket', algorithm_config: tb }],
      },
    },
  ],
}

interface Answer {
  status: number
  reason: string | undefined
  body: string
}

/** One request with its target written on the request line exactly as given (fetch would normalise it first). */
function send(base: string, target: string, host?: string): Promise<Answer> {
  const u = new URL(base)
  return new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, path: target, agent: false, headers: host === undefined ? {} : { host } },
      (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => (body += c))
        res.on('end', () => resolve({ status: res.statusCode!, reason: res.headers['x-fairvisor-reason'] as string | undefined, body }))
      },
    )
    req.on('error', reject)
    req.end()
  })
}

function bundleFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fv-paths-'))
  writeFileSync(join(dir, 'bundle.json'), JSON.stringify(BUNDLE))
  return join(dir, 'bundle.json')
}

/** Spends the one token, then expects every spelling to be counted or refused, and none to reach the backend. */
async function assertCounted(base: string, backend: Backend, escaped: 'refused' | 'counted', why: () => string = () => ''): Promise<void> {
  const first = await send(base, '/api/expensive')
  assert.equal(first.status, 200, `the first request spends the token ${why()}`)
  const seen = backend.count
  for (const v of VARIANTS) {
    const r = await send(base, v)
    assert.equal(r.status, 429, `${v} must be counted as /api/expensive (got ${r.status} ${r.body}) ${why()}`)
    assert.equal(r.reason, 'token_bucket_exceeded', v)
  }
  for (const v of ESCAPED) {
    const r = await send(base, v)
    if (escaped === 'counted') assert.equal(r.status, 429, `${v} must be counted (got ${r.status} ${r.body}) ${why()}`)
    else {
      assert.equal(r.status, 400, `${v} must be refused (got ${r.status} ${r.body}) ${why()}`)
      assert.equal(r.reason, 'encoded_slash', v)
    }
  }
  assert.equal(backend.count, seen, 'no spelling reached the backend')
}

describe('reverse proxy: every spelling of a limited path is counted', () => {
  let backend: Backend
  const seen: string[] = []
  const gateways: GatewayProcess[] = []
  const gateway = async (env: Record<string, string> = {}): Promise<GatewayProcess> => {
    const gw = await startGateway({ FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: bundleFile(), ...env })
    gateways.push(gw)
    return gw
  }
  before(async () => {
    backend = await startBackend((req, res) => {
      seen.push(req.url!)
      res.end(`backend saw ${req.url}`)
    })
  })
  after(async () => {
    for (const gw of gateways) await gw.stop()
    await backend?.close()
  })

  test('default settings: counted (429), escaped slashes refused (400 encoded_slash)', async () => {
    await assertCounted((await gateway()).url, backend, 'refused')
  })

  test('FAIRVISOR_ENCODED_SLASHES=decode: escaped slashes are separators and counted too', async () => {
    await assertCounted((await gateway({ FAIRVISOR_ENCODED_SLASHES: 'decode' })).url, backend, 'counted')
  })

  test('absolute form: an authority that is not Host is refused; one that is, is matched on that host', async () => {
    const gw = await gateway()
    const before = backend.count
    const r = await send(gw.url, 'http://admin.example.com/h', 'other')
    assert.equal(r.status, 400, r.body)
    assert.equal(r.reason, 'host_mismatch')
    assert.equal(backend.count, before, 'the refused request never reached the backend')
    assert.equal((await send(gw.url, 'http://admin.example.com/h', 'admin.example.com')).status, 200)
    assert.equal(seen.at(-1), '/h', 'forwarded in origin form')
    const again = await send(gw.url, 'http://ADMIN.example.com:80/h', 'admin.example.com')
    assert.equal(again.status, 429, 'the host-scoped policy counted it')
  })

  test('the backend gets the path the gateway matched, or with FAIRVISOR_FORWARD_PATH=original the one sent', async () => {
    const target = '/free//a/./b/../c;v=1?q=%2F..#frag'
    const normalised = await gateway()
    assert.equal((await send(normalised.url, target)).body, 'backend saw /free/a/c;v=1?q=%2F..')
    assert.equal((await send(normalised.url, '/free/x?y=1')).body, 'backend saw /free/x?y=1')
    const original = await gateway({ FAIRVISOR_FORWARD_PATH: 'original' })
    assert.equal((await send(original.url, target)).body, 'backend saw /free//a/./b/../c;v=1?q=%2F..')
  })
})

describe('decision service behind the documented nginx auth_request block', { skip: !HAVE_NGINX }, () => {
  let backend: Backend
  const gateways: GatewayProcess[] = []
  const proxies: NginxProcess[] = []
  /** A decision-service gateway with `env`, and nginx in front of it and the backend. */
  const stack = async (env: Record<string, string> = {}): Promise<NginxProcess> => {
    const gw = await startGateway({
      FAIRVISOR_MODE: 'decision_service',
      FAIRVISOR_CONFIG_FILE: bundleFile(),
      FAIRVISOR_TRUSTED_PROXIES: '127.0.0.1',
      ...env,
    })
    gateways.push(gw)
    const nginx = await startDocsAuthRequest(gw.port, backend.port)
    proxies.push(nginx)
    return nginx
  }
  before(async () => {
    backend = await startBackend((req, res) => res.end(`backend saw ${req.url}`))
  })
  after(async () => {
    for (const n of proxies) await n.stop()
    for (const gw of gateways) await gw.stop()
    await backend?.close()
  })

  test('default settings: counted (429), escaped slashes refused (400 encoded_slash)', async () => {
    const nginx = await stack()
    await assertCounted(nginx.url, backend, 'refused', nginx.stderr)
  })

  test('FAIRVISOR_ENCODED_SLASHES=decode: counted as nginx $uri reads them', async () => {
    const nginx = await stack({ FAIRVISOR_ENCODED_SLASHES: 'decode' })
    await assertCounted(nginx.url, backend, 'counted', nginx.stderr)
  })
})

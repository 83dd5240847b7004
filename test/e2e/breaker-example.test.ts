/**
 * A circuit breaker one request can open rejects every client of its policy
 * for one client's request: `fairvisor validate` warns about such a
 * threshold (through the real CLI), and the shipped
 * policies/circuit-breaker.json, run by the real gateway process, stays
 * closed through a request of the largest cost its rule lets through.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { CLI, metricValue, ROOT, startBackend, startGateway } from '../helpers/processes.js'

const tmp = mkdtempSync(join(tmpdir(), 'fv-breaker-'))
after(() => rmSync(tmp, { recursive: true, force: true }))

let n = 0

/** `fairvisor validate` on a bundle object (written to a file) or a file under the repository. */
function validate(bundle: object | string, json = false): { code: number | null; stdout: string } {
  const file = typeof bundle === 'string' ? join(ROOT, bundle) : join(tmp, `b${n++}.json`)
  if (typeof bundle !== 'string') writeFileSync(file, JSON.stringify(bundle))
  const r = spawnSync(process.execPath, [CLI, 'validate', file, ...(json ? ['--format', 'json'] : [])], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 20000,
  })
  return { code: r.status, stdout: r.stdout }
}

const breaker = (threshold: number, rule: object): object => ({
  bundle_version: 1,
  policies: [
    {
      id: 'p',
      spec: {
        selector: { pathPrefix: '/' },
        circuit_breaker: { enabled: true, spend_rate_threshold_per_minute: threshold, action: 'reject', auto_reset_after_minutes: 5 },
        rules: [{ name: 'r', limit_keys: ['header:x-tenant'], ...rule }],
      },
    },
  ],
})
const bucket = (config: object): object => ({ algorithm: 'token_bucket', algorithm_config: { tokens_per_second: 10, ...config } })

describe('fairvisor validate and circuit breakers', () => {
  test('warns (exit 0) when one request can carry the threshold: a client-set cost up to the burst or budget, a fixed cost', () => {
    const cases: [object, RegExp][] = [
      [
        breaker(1000, bucket({ burst: 1000, cost_source: 'header:x-request-cost' })),
        /\(1000\) is not above the cost one request can count \(1000: the client sets the cost of rule "r" in header:x-request-cost, up to its capacity\)/,
      ],
      [breaker(400, bucket({ burst: 1000, cost_source: 'query:cost' })), /\(400\) is not above the cost one request can count \(1000:/],
      [
        breaker(5, bucket({ burst: 100, fixed_cost: 5 })),
        /\(5\) is not above the cost one request can count \(5: the fixed cost of rule "r"\)/,
      ],
      [
        breaker(50, {
          algorithm: 'cost_based',
          algorithm_config: {
            budget: 50,
            period: '1h',
            cost_key: 'header:x-cost',
            staged_actions: [{ threshold_percent: 100, action: 'reject' }],
          },
        }),
        /\(50\) is not above the cost one request can count \(50:/,
      ],
    ]
    for (const [bundle, warning] of cases) {
      const r = validate(bundle)
      assert.equal(r.code, 0, r.stdout)
      assert.match(
        r.stdout,
        new RegExp(`^warning: .*/policies/0/spec/circuit_breaker/spend_rate_threshold_per_minute: policy "p": .*${warning.source}`, 'm'),
      )
      assert.match(r.stdout, /^ok \(1 warning\)$/m)
    }
    const json = validate(breaker(1000, bucket({ burst: 1000, cost_source: 'header:x-request-cost' })), true)
    assert.match(
      (JSON.parse(json.stdout) as { warnings: string[] }).warnings.join('\n'),
      /a single request opens the breaker for every client/,
    )
  })

  test('no warning when the threshold is above the largest cost of one request', () => {
    for (const bundle of [
      breaker(1001, bucket({ burst: 1000, cost_source: 'header:x-request-cost' })),
      breaker(2, bucket({ burst: 1000 })),
      breaker(6, bucket({ burst: 100, fixed_cost: 5 })),
    ]) {
      const r = validate(bundle)
      assert.equal(r.code, 0)
      assert.match(r.stdout, /^ok$/m, r.stdout)
    }
    const shipped = validate('policies/circuit-breaker.json')
    assert.equal(shipped.code, 0)
    assert.match(shipped.stdout, /^ok$/m, shipped.stdout)
  })
})

describe('the shipped policies/circuit-breaker.json', () => {
  test('one request of the largest cost its rule lets through does not open the breaker for the other tenants', async () => {
    const backend = await startBackend()
    const gw = await startGateway({
      FAIRVISOR_BACKEND_URL: backend.url,
      FAIRVISOR_CONFIG_FILE: join(ROOT, 'policies/circuit-breaker.json'),
      FAIRVISOR_STORE: 'memory',
    })
    try {
      const send = async (tenant: string, cost: string): Promise<{ status: number; reason: string | null }> => {
        const r = await fetch(`${gw.url}/v1/generate/x`, { headers: { 'x-tenant-id': tenant, 'x-request-cost': cost } })
        await r.arrayBuffer()
        return { status: r.status, reason: r.headers.get('x-fairvisor-reason') }
      }
      assert.deepEqual(await send('greedy', '1000'), { status: 200, reason: null }, 'the burst in one request')
      assert.deepEqual(await send('greedy', '1000'), { status: 429, reason: 'token_bucket_exceeded' }, "then the tenant's own limit")
      assert.deepEqual(await send('other', '1'), { status: 200, reason: null }, 'the other tenants are served')
      assert.equal(await metricValue(gw, 'fairvisor_circuit_state', 'target="generate"'), 0)
    } finally {
      assert.equal(await gw.stop(), 0)
      await backend.close()
    }
  })
})

/**
 * /metrics (docs/behaviour.md §10) on the real gateway: every name present before
 * traffic, counters that add up after traffic, bounded label values, and the
 * scrape accepted by `promtool check metrics`.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { startGateway, type GatewayProcess } from '../helpers/processes.js'

const ALWAYS = [
  'fairvisor_decisions_total',
  'fairvisor_decision_duration_seconds',
  'fairvisor_ratelimit_remaining',
  'fairvisor_tokens_consumed_total',
  'fairvisor_tokens_remaining',
  'fairvisor_token_estimation_accuracy_ratio',
  'fairvisor_token_reservation_unused_total',
  'fairvisor_loop_detected_total',
  'fairvisor_circuit_state',
  'fairvisor_kill_switch_active',
  'fairvisor_shadow_mode_active',
  'fairvisor_global_shadow_active',
  'fairvisor_kill_switch_override_active',
  'fairvisor_saas_reachable',
  'fairvisor_saas_calls_total',
  'fairvisor_events_sent_total',
  'fairvisor_config_info',
  'fairvisor_build_info',
  'fairvisor_descriptor_missing_total',
  'fairvisor_jwt_rejected_total',
  'fairvisor_retry_after_bucket_total',
]

const BUNDLE = {
  bundle_version: 5,
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
            algorithm_config: { tokens_per_second: 0.01, burst: 4, cost_source: 'header:x-cost' },
          },
        ],
      },
    },
    {
      id: 'dry',
      spec: {
        selector: { pathPrefix: '/dry/' },
        mode: 'shadow',
        rules: [
          {
            name: 'dry_user',
            limit_keys: ['header:x-user'],
            algorithm: 'token_bucket',
            algorithm_config: { tokens_per_second: 0.01, burst: 1 },
          },
        ],
      },
    },
  ],
  kill_switches: [{ scope_key: 'header:x-kill', scope_value: 'on' }],
}

function writeBundle(doc: object): string {
  const file = join(mkdtempSync(join(tmpdir(), 'fv-metrics-')), 'bundle.json')
  writeFileSync(file, JSON.stringify(doc))
  return file
}

/** `name{labels} value` lines as a map from the series text to its value. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const sp = line.lastIndexOf(' ')
    out.set(line.slice(0, sp), Number(line.slice(sp + 1)))
  }
  return out
}

describe('metrics', () => {
  let gw: GatewayProcess
  const scrape = async () => {
    const r = await fetch(`${gw.url}/metrics`)
    assert.equal(r.status, 200)
    assert.match(r.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/)
    return r.text()
  }
  const decide = (uri: string, headers: Record<string, string>) =>
    fetch(`${gw.url}/v1/decision`, { method: 'POST', headers: { 'x-original-method': 'POST', 'x-original-uri': uri, ...headers } })

  before(async () => {
    gw = await startGateway({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_CONFIG_FILE: writeBundle(BUNDLE) })
  })
  after(() => gw?.stop())

  test('every docs/behaviour.md §10 name has HELP and TYPE before any traffic', async () => {
    const text = await scrape()
    for (const name of ALWAYS) {
      assert.match(text, new RegExp(`^# HELP ${name} \\S`, 'm'), name)
      assert.match(text, new RegExp(`^# TYPE ${name} (counter|gauge|histogram)$`, 'm'), name)
    }
    assert.match(text, /^# TYPE fairvisor_decision_duration_seconds histogram$/m)
    const s = samples(text)
    assert.equal(s.get('fairvisor_kill_switch_active'), 1)
    assert.equal(s.get('fairvisor_shadow_mode_active'), 1)
    assert.equal(s.get('fairvisor_global_shadow_active'), 0)
    assert.match([...s.keys()].find((k) => k.startsWith('fairvisor_config_info{')) ?? '', /version="5",hash="[A-Za-z0-9+/=]{28}"/)
  })

  test('after traffic the counters add up, labels stay bounded, and promtool accepts the scrape', async (t) => {
    // 2 allows of cost 2 (4 tokens), then a reject; 3 missing-key allows; 2 kill-switch rejects; 2 shadow allows.
    for (const cost of ['2', '2', '1']) await decide('/api/orders/123?id=9', { 'x-user': 'secret-user-id-1', 'x-cost': cost })
    for (let i = 0; i < 3; i++) await decide('/api/orders/456', {})
    for (let i = 0; i < 2; i++) await decide('/api/orders/789', { 'x-kill': 'on', 'x-user': 'secret-user-id-2' })
    for (let i = 0; i < 2; i++) await decide('/dry/x', { 'x-user': 'secret-user-id-3' })
    const text = await scrape()
    const s = samples(text)
    assert.equal(s.get('fairvisor_decisions_total{action="allow",reason="all_rules_passed",policy="api"}'), 2)
    // Allows that charged no enforce limit (missing key, shadow only) name no policy.
    assert.equal(s.get('fairvisor_decisions_total{action="allow",reason="all_rules_passed",policy=""}'), 5)
    assert.equal(s.get('fairvisor_decisions_total{action="reject",reason="token_bucket_exceeded",policy="api"}'), 1)
    assert.equal(s.get('fairvisor_decisions_total{action="reject",reason="kill_switch",policy=""}'), 2)
    assert.equal(s.get('fairvisor_decision_duration_seconds_count'), 10)
    assert.equal(s.get('fairvisor_tokens_consumed_total{policy="api"}'), 4)
    assert.equal(s.has('fairvisor_tokens_consumed_total{policy="dry"}'), false, 'shadow limits consume nothing real')
    const left = s.get('fairvisor_tokens_remaining{policy="api"}')!
    assert.ok(left >= 0 && left < 0.1, `tokens remaining ${left} (empty bucket plus a few ms of refill)`)
    assert.equal(s.get('fairvisor_descriptor_missing_total{key="header:x-user"}'), 3)
    assert.equal(s.get('fairvisor_retry_after_bucket_total{bucket="gt_3600"}'), 2)
    assert.equal(s.get('fairvisor_shadow_would_reject_total{policy="dry"}'), 1)
    // No label value carries a path, a query or a limit-key value.
    for (const leak of ['secret-user-id', '/api/orders', 'id=9', '123']) assert.ok(!text.includes(leak), `scrape leaks ${leak}`)

    const promtool = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' })
    if (promtool.error && (promtool.error as NodeJS.ErrnoException).code === 'ENOENT') {
      console.error('\n\n*** promtool NOT INSTALLED: `promtool check metrics` was SKIPPED (apt-get install prometheus) ***\n\n')
      t.skip('promtool is not installed')
      return
    }
    assert.equal(promtool.status, 0, `promtool check metrics failed:\n${promtool.stdout}${promtool.stderr}`)
    assert.equal(`${promtool.stdout}${promtool.stderr}`.trim(), '', 'no lint warnings either')
  })
})

/** What `fairvisor status` prints (src/commands/status-report.ts), from admin API answers. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bundleLines, rateLines, readinessLine, topLines } from '../../../src/commands/status-report.js'

test('readiness, ready or not', () => {
  assert.equal(
    readinessLine('http://h:9', { ready: true, body: { policy_version: 7, store: 'ok' } }),
    'http://h:9: ready (bundle version 7, store ok)',
  )
  assert.equal(
    readinessLine('http://h:9', { ready: false, body: { reason: 'no_policy_loaded', store: 'ok' } }),
    'http://h:9: NOT READY (no_policy_loaded, store ok)',
  )
})

test('the bundle, how it runs, each policy and its rules', () => {
  const lines = bundleLines({
    version: '7',
    hash: '0123456789abcdef',
    source: '/etc/fairvisor/bundle.json',
    loaded_at: '2026-01-01T00:00:00.000Z',
    mode: 'reverse_proxy',
    workers: 2,
    store: { kind: 'redis', healthy: false },
    policies: [
      {
        id: 'api',
        mode: 'shadow',
        rules: [
          { name: 'per_user', algorithm: 'token_bucket', limit_keys: ['jwt:sub', 'header:x-tier'] },
          { name: 'loop_detection', algorithm: 'loop_detection', limit_keys: [] },
        ],
      },
    ],
  })
  assert.deepEqual(lines, [
    'bundle   version 7, hash 0123456789ab, loaded 2026-01-01T00:00:00.000Z, from /etc/fairvisor/bundle.json',
    '         reverse_proxy, 2 workers, store redis (NOT healthy)',
    'policy   api (shadow): per_user token_bucket by jwt:sub+header:x-tier; loop_detection loop_detection',
  ])
  assert.equal(
    bundleLines({
      version: null,
      hash: null,
      source: null,
      loaded_at: null,
      mode: 'decision_service',
      workers: 1,
      store: { kind: 'memory', healthy: true },
      policies: [],
    })[0],
    'bundle   none loaded',
  )
})

test('rates per second of the time between the two reads, rejects by reason most first', () => {
  const first = { at: '2026-01-01T00:00:00.000Z', decisions: { allow: 100, reject: 10, shadow_reject: 0 }, rejects_by_reason: { a: 10 } }
  const second = {
    at: '2026-01-01T00:00:02.000Z',
    decisions: { allow: 120, reject: 20, shadow_reject: 3 },
    rejects_by_reason: { a: 12, b: 8 },
  }
  assert.deepEqual(rateLines(first, second), [
    'rates    15.0 decisions/s over 2.0 s: 10.0 allowed, 5.0 rejected, 1.5 shadow would-reject',
    '         rejects/s by reason: b 4.0, a 1.0',
  ])
  assert.equal(rateLines(first, first)[1], '         rejects/s by reason: none')
})

test('the top keys as a table; none', () => {
  assert.deepEqual(
    topLines({
      window_seconds: 300,
      entries: [
        { policy: 'api', rule: 'per_key', reason: 'token_bucket_exceeded', key: 'sha256:0123456789ab', count: 120, error: 3 },
        { policy: 'api', rule: 'per_user', reason: 'token_bucket_exceeded', key: 'alice', count: 7, error: 0 },
      ],
    }),
    [
      'top keys rejected in the last 150-300 s:',
      '  COUNT  POLICY  RULE      REASON                 KEY',
      '  120    api     per_key   token_bucket_exceeded  sha256:0123456789ab',
      '  7      api     per_user  token_bucket_exceeded  alice',
    ],
  )
  assert.deepEqual(topLines({ window_seconds: 60, entries: [] }), ['top keys rejected in the last 30-60 s: none'])
})

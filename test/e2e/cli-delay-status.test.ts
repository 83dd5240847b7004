/**
 * `fairvisor validate` and `fairvisor test` on the delay and status-counting
 * examples (policies/delay-smoothing.json, policies/status-counting.json),
 * through the real CLI process: the mode a bundle is validated for, the
 * response status a sample line gives, requests held for their turn (a
 * token bucket's tokens, a sliding window's count) and refused past
 * FAIRVISOR_MAX_DELAYED.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { CLI, ROOT } from '../helpers/processes.js'

function cli(args: string[], env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 20000,
    env: { PATH: process.env.PATH, ...env },
  })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

const tmp = mkdtempSync(join(tmpdir(), 'fv-cli-delay-'))
after(() => rmSync(tmp, { recursive: true, force: true }))
const lines = (name: string, rows: object[]): string => {
  const file = join(tmp, `${name}.jsonl`)
  writeFileSync(file, `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`)
  return file
}
const reports = (stdout: string): Record<string, unknown>[] =>
  stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)

describe('fairvisor validate: rules that act on the response need the reverse proxy', () => {
  test('valid for the reverse proxy (the default); refused in decision_service mode, by --mode or FAIRVISOR_MODE, with the pointer', () => {
    assert.equal(cli(['validate', 'policies/status-counting.json']).code, 0)
    for (const run of [
      cli(['validate', 'policies/status-counting.json', '--mode', 'decision_service']),
      cli(['validate', 'policies/status-counting.json'], { FAIRVISOR_MODE: 'decision_service' }),
    ]) {
      assert.equal(run.code, 1)
      assert.match(
        run.stderr,
        /error: policies\/status-counting\.json: \/policies\/0\/spec\/rules\/0\/count_statuses: policy "login", rule "failed_logins": count_statuses needs FAIRVISOR_MODE=reverse_proxy/,
      )
      assert.match(run.stderr, /\/policies\/1\/spec\/rules\/0\/refund_statuses: policy "api", rule "api_calls": refund_statuses needs/)
    }
    assert.equal(
      cli(['validate', 'policies/status-counting.json', '--mode', 'reverse_proxy'], { FAIRVISOR_MODE: 'decision_service' }).code,
      0,
    )
    const bad = cli(['validate', 'policies/status-counting.json', '--mode', 'sidecar'])
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /--mode must be reverse_proxy or decision_service, not "sidecar"/)
  })
})

describe('fairvisor test: response statuses and held requests', () => {
  test('count_statuses: 200s are given back, 401s kept, and the key is rejected once they used the budget', () => {
    const file = lines('logins', [
      { method: 'POST', path: '/login', status: 200, repeat: 10 },
      { method: 'POST', path: '/login', status: 401, repeat: 5 },
      { method: 'POST', path: '/login', status: 200 },
      { path: '/api/x', headers: { 'x-api-key': 'k' }, status: 503 },
    ])
    const run = cli(['test', 'policies/status-counting.json', '--requests', file, '--format', 'json'])
    assert.equal(run.code, 0, run.stderr)
    const r = reports(run.stdout)
    assert.deepEqual(
      r.map((x) => x.decision),
      [...Array(15).fill('allow'), 'reject', 'allow'],
    )
    assert.deepEqual(r[0]!.status_settlement, [{ policy: 'login', rule: 'failed_logins', cost: 1, refunded: true }])
    assert.deepEqual(r[10]!.status_settlement, [{ policy: 'login', rule: 'failed_logins', cost: 1, refunded: false }])
    assert.equal(r[10]!.response_status, 401)
    assert.equal(r[15]!.status_settlement, undefined, 'a reject has nothing to settle')
    assert.deepEqual(r[16]!.status_settlement, [{ policy: 'api', rule: 'api_calls', cost: 1, refunded: true }])
    const table = cli(['test', 'policies/status-counting.json', '--requests', file])
    assert.match(table.stdout, /response 401: login\/failed_logins cost 1 kept/)
    assert.match(table.stdout, /response 503: api\/api_calls cost 1 given back/)
  })

  test('a sample line’s status must be an HTTP status', () => {
    const run = cli(['test', 'policies/status-counting.json', '--requests', lines('bad', [{ path: '/', status: 700 }])])
    assert.equal(run.code, 1)
    assert.match(run.stderr, /bad\.jsonl:1: "status" must be an HTTP status from 100 to 599/)
  })

  test('max_delay_ms: 8 at once are held 0, 200 … 1400 ms for their tokens; past FAIRVISOR_MAX_DELAYED holds they are refused', () => {
    const file = lines('batch', [{ path: '/v1/batch/x', headers: { 'x-api-key': 'k' }, repeat: 8 }])
    const run = cli(['test', 'policies/delay-smoothing.json', '--requests', file, '--format', 'json'])
    assert.equal(run.code, 0, run.stderr)
    const r = reports(run.stdout)
    assert.deepEqual(
      r.map((x) => x.delay_ms ?? 0),
      [0, 200, 400, 600, 800, 1000, 1200, 1400],
    )
    assert.equal(r[3]!.debt, true)
    const table = cli(['test', 'policies/delay-smoothing.json', '--requests', file])
    assert.match(table.stdout, /→ ALLOW 200 all_rules_passed \(batch\/batch_smoothing\), held 1400 ms for its turn/)
    assert.match(table.stdout, /in debt: 7 token\(s\) owed, 1400 ms of refill/)
    const bounded = cli(['test', 'policies/delay-smoothing.json', '--requests', file, '--format', 'json'], { FAIRVISOR_MAX_DELAYED: '2' })
    assert.deepEqual(
      reports(bounded.stdout).map((x) => (x.hold_refused ? 'refused' : x.decision)),
      ['allow', 'allow', 'allow', 'refused', 'refused', 'refused', 'refused', 'refused'],
    )
  })

  test('a sliding window with max_delay_ms: 10 at once, 5 now, 4 held 1200 … 1800 ms, the 10th refused; each hold and estimate shown', () => {
    const file = lines('exports', [{ path: '/v1/exports/x', headers: { 'x-api-key': 'k' }, repeat: 10 }])
    const run = cli(['test', 'policies/delay-smoothing.json', '--requests', file, '--format', 'json'])
    assert.equal(run.code, 0, run.stderr)
    const r = reports(run.stdout)
    assert.deepEqual(
      r.map((x) => [x.decision, x.delay_ms ?? 0, x.debt ?? false]),
      [
        ['allow', 0, false],
        ['allow', 0, false],
        ['allow', 0, false],
        ['allow', 0, false],
        ['allow', 0, false],
        ['allow', 1200, true],
        ['allow', 1400, true],
        ['allow', 1600, true],
        ['allow', 1800, true],
        ['reject', 0, false],
      ],
    )
    assert.equal(r[9]!.reason, 'sliding_window_exceeded')
    const table = cli(['test', 'policies/delay-smoothing.json', '--requests', file])
    assert.match(table.stdout, /→ ALLOW 200 all_rules_passed \(exports\/exports_per_second\), held 1800 ms for its turn/)
    assert.match(table.stdout, /→ allowed; estimate 9\/5 in the last 1 s \(4 over: counted ahead for held requests\)/)
  })
})

/**
 * `concurrency` rules through the CLI (dist/cli.js): `fairvisor test` holds
 * each sample request's slots for its line's `hold` seconds on the driven
 * clock (policies/concurrency.json), and `fairvisor validate` refuses a slot
 * given back at the exchange's end for a gateway in decision_service mode
 * or with gRPC (`--mode`, `--grpc`), at the pointer of `release`.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { CLI, ROOT } from '../helpers/processes.js'

const tmp = mkdtempSync(join(tmpdir(), 'fv-cli-cc-'))
after(() => rmSync(tmp, { recursive: true, force: true }))

function cli(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 20000 })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

test('fairvisor test: a line’s requests hold their slots for its `hold` seconds, then give them back', () => {
  const samples = join(tmp, 'streams.jsonl')
  const a = { method: 'POST', path: '/v1/chat/completions', headers: { authorization: 'Bearer sk-a' } }
  writeFileSync(
    samples,
    [
      { ...a, repeat: 5, hold: 20 },
      { ...a, at: 10 },
      { ...a, headers: { authorization: 'Bearer sk-b' }, at: 10 },
      { ...a, at: 21, repeat: 2 },
    ]
      .map((l) => JSON.stringify(l))
      .join('\n'),
  )
  const r = cli('test', 'policies/concurrency.json', '--requests', samples, '--format', 'json', '--start', '2026-01-01T00:00:00Z')
  assert.equal(r.code, 0, r.stderr)
  const out = r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { at: number; reason: string; headers: Record<string, string>; slots_held_s?: number })
  assert.deepEqual(
    out.map((o) => [o.at, o.reason, o.headers['RateLimit-Remaining'], o.slots_held_s]),
    [
      [0, 'all_rules_passed', '3', 20],
      [0, 'all_rules_passed', '2', 20],
      [0, 'all_rules_passed', '1', 20],
      [0, 'all_rules_passed', '0', 20],
      [0, 'concurrency_exceeded', '0', undefined],
      [10, 'concurrency_exceeded', '0', undefined],
      [10, 'all_rules_passed', '3', 0],
      [21, 'all_rules_passed', '3', 0],
      [21, 'all_rules_passed', '3', 0],
    ],
  )
  assert.match(out[4]!.headers['Retry-After']!, /^[12]$/)
})

test('fairvisor validate: --mode decision_service and --grpc refuse a slot given back at the end of an exchange; "release": "lease" passes', () => {
  const bundle = JSON.parse(readFileSync(join(ROOT, 'policies/concurrency.json'), 'utf8')) as {
    policies: { spec: { rules: { algorithm_config: Record<string, unknown> }[] } }[]
  }
  const file = join(tmp, 'bundle.json')
  writeFileSync(file, JSON.stringify(bundle))
  assert.equal(cli('validate', file).code, 0)
  for (const flags of [['--mode', 'decision_service'], ['--grpc']]) {
    const r = cli('validate', file, ...flags)
    assert.equal(r.code, 1, r.stdout)
    assert.match(
      r.stderr,
      /\/policies\/0\/spec\/rules\/0\/algorithm_config\/release: policy "inference", rule "in_flight_per_key": .*set "release": "lease"/,
    )
    assert.match(r.stderr, /\/policies\/0\/spec\/rules\/1\/algorithm_config\/release/)
  }
  for (const r of bundle.policies[0]!.spec.rules) r.algorithm_config.release = 'lease'
  writeFileSync(file, JSON.stringify(bundle))
  const ok = cli('validate', file, '--mode', 'decision_service', '--grpc')
  assert.equal(ok.code, 0, ok.stderr)
  assert.equal(cli('validate', file, '--mode', 'edge').code, 2)
})

/**
 * `fairvisor test` on token_bucket_llm rules and budgets in money: a sample line with a `body`
 * shows the prompt estimate and the reservation; with a `response` (a JSON
 * answer or SSE text) it shows the settlement the gateway would make (a budget in money: priced).
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { CLI, ROOT } from '../helpers/processes.js'

const dir = mkdtempSync(join(tmpdir(), 'fv-cli-llm-'))
after(() => rmSync(dir, { recursive: true, force: true }))

const bundle = join(dir, 'llm.json')
writeFileSync(
  bundle,
  JSON.stringify({
    bundle_version: 1,
    policies: [
      {
        id: 'llm',
        spec: {
          selector: { pathPrefix: '/v1/' },
          rules: [
            {
              name: 'per_key',
              limit_keys: ['header:x-api-key'],
              algorithm: 'token_bucket_llm',
              algorithm_config: {
                tokens_per_minute: 10000,
                tokens_per_day: 100000,
                default_max_completion: 100,
                token_source: { estimator: 'simple_word' },
              },
            },
          ],
        },
      },
    ],
  }),
)

const chat = (content: string, extra: object = {}): object => ({
  model: 'm',
  max_tokens: 60,
  messages: [{ role: 'user', content }],
  ...extra,
})
const lines = [
  { path: '/v1/chat/completions', headers: { 'x-api-key': 'k' }, body: chat('x'.repeat(40)) },
  {
    path: '/v1/chat/completions',
    headers: { 'x-api-key': 'k' },
    body: chat('x'.repeat(40)),
    response: { usage: { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 } },
  },
  {
    path: '/v1/chat/completions',
    headers: { 'x-api-key': 'k' },
    body: chat('x'.repeat(40), { stream: true }),
    response:
      'data: {"choices":[{"delta":{"content":"hello"}}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":90,"total_tokens":100}}\n\ndata: [DONE]\n\n',
  },
]
const samples = join(dir, 'samples.jsonl')
writeFileSync(samples, lines.map((l) => JSON.stringify(l)).join('\n'))

test('estimate and reservation per request; a JSON or SSE response settles it (refund or charge on top)', () => {
  const r = spawnSync(process.execPath, [CLI, 'test', bundle, '--requests', samples, '--format', 'json'], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 20000,
  })
  assert.equal(r.status, 0, r.stderr)
  const [plain, json, sse] = r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { llm: Record<string, unknown>[] })
  // simple_word: 40 characters of messages → ceil(40 / 4) = 10 prompt tokens, plus max_tokens 60.
  assert.deepEqual(plain!.llm, [{ policy: 'llm', rule: 'per_key', prompt_estimate: 10, reserved: 70 }])
  assert.deepEqual(json!.llm, [
    { policy: 'llm', rule: 'per_key', prompt_estimate: 10, reserved: 70, settled: 20, settled_by: 'usage', reported_prompt: 12 },
  ])
  assert.deepEqual(sse!.llm, [
    { policy: 'llm', rule: 'per_key', prompt_estimate: 10, reserved: 70, settled: 100, settled_by: 'usage', reported_prompt: 10 },
  ])
  const table = spawnSync(process.execPath, [CLI, 'test', bundle, '--requests', samples], { cwd: ROOT, encoding: 'utf8', timeout: 20000 })
  assert.match(table.stdout, /llm llm\/per_key: prompt estimate 10, reserved 70, settled 20 \(usage, reported prompt 12\), 50 given back/)
  assert.match(table.stdout, /settled 100 \(usage, reported prompt 10\), 30 charged on top/)
})

test('a budget in money: the model, the reservation priced, and the settlement priced by token kind (cached input apart)', () => {
  const money = join(dir, 'money.json')
  writeFileSync(
    money,
    JSON.stringify({
      bundle_version: 1,
      llm_prices: {
        currency: 'EUR',
        per_million_tokens: { 'gpt-4o*': { input: 2.5, cached_input: 1.25, output: 10 }, default: { input: 15, output: 60 } },
      },
      policies: [
        {
          id: 'eur',
          spec: {
            selector: { pathPrefix: '/v1/' },
            rules: [
              {
                name: 'per_key',
                limit_keys: ['header:x-api-key'],
                algorithm: 'cost_based',
                algorithm_config: {
                  budget: 5,
                  period: '1d',
                  cost_key: 'llm_price',
                  max_cost_per_request: 0.5,
                  staged_actions: [{ threshold_percent: 100, action: 'reject' }],
                },
              },
            ],
          },
        },
      ],
    }),
  )
  const sampleFile = join(dir, 'money.jsonl')
  const usage = { prompt_tokens: 2000, completion_tokens: 50, prompt_tokens_details: { cached_tokens: 1024 } }
  writeFileSync(
    sampleFile,
    [
      {
        path: '/v1/chat/completions',
        headers: { 'x-api-key': 'k' },
        body: chat('x'.repeat(40), { model: 'GPT-4o-2024-08-06' }),
        response: { usage },
      },
      { path: '/v1/chat/completions', headers: { 'x-api-key': 'k' }, body: chat('x'.repeat(40), { model: 'o3-pro', max_tokens: 10_000 }) },
    ]
      .map((l) => JSON.stringify(l))
      .join('\n'),
  )
  const r = spawnSync(process.execPath, [CLI, 'test', money, '--requests', sampleFile, '--format', 'json'], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 20000,
  })
  assert.equal(r.status, 0, r.stderr)
  const [priced, capped] = r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { llm?: Record<string, unknown>[]; reason: string })
  // Reserved: 10 × 2.5 + 60 × 10 = 625 micros; settled: 976 × 2.5 + 1024 × 1.25 + 50 × 10 = 4220.
  assert.deepEqual(priced!.llm, [
    {
      policy: 'eur',
      rule: 'per_key',
      prompt_estimate: 10,
      reserved: 70,
      model: 'gpt-4o-2024-08-06',
      currency: 'EUR',
      reserved_micros: 625,
      settled: 2050,
      settled_by: 'usage',
      settled_micros: 4220,
    },
  ])
  // 10 × 15 + 10000 × 60 = 0.60015 EUR > 0.5.
  assert.equal(capped!.reason, 'cost_per_request_exceeded')
  const table = spawnSync(process.execPath, [CLI, 'test', money, '--requests', sampleFile], { cwd: ROOT, encoding: 'utf8', timeout: 20000 })
  assert.match(
    table.stdout,
    /spend eur\/per_key: model gpt-4o-2024-08-06, prompt estimate 10, reserved 0\.000625 EUR \(70 tokens\), settled 0\.00422 EUR \(usage, 2050 tokens\), 0\.003595 EUR charged on top/,
  )
})

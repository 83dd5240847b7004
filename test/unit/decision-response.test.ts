/** The pure decision → response function answers exactly what the HTTP paths write (respond.ts). */
import assert from 'node:assert/strict'
import { createServer, request, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import type { Decision } from '../../src/engine/evaluate.js'
import { decisionResponse } from '../../src/http/decision-response.js'
import { allowHeaders, sendRejection } from '../../src/http/respond.js'

const limit = { policyId: 'api "v1"', limit: 10, remaining: 0, resetS: 7, windowS: 60 }
const base = { mode: 'enforce', matchedPolicies: ['p'] } as const
const CASES: Array<[string, Decision]> = [
  ['429 with limit', { ...base, allowed: false, status: 429, reason: 'rate_limit_exceeded' as Decision['reason'], retryAfterS: 7, limit }],
  ['429 kill switch, no limit', { ...base, allowed: false, status: 429, reason: 'kill_switch', retryAfterS: 30 }],
  ['503 no bundle', { ...base, allowed: false, status: 503, reason: 'no_bundle_loaded' }],
  ['429 LLM', { ...base, allowed: false, status: 429, reason: 'tpm_exceeded' as Decision['reason'], retryAfterS: 3, limit }],
]

/** What a ServerResponse written by `write` puts on the wire: status, headers (minus the transport's own), body. */
async function wire(write: (res: ServerResponse) => void): Promise<{ status: number; headers: string[]; body: string }> {
  const server = createServer((_req, res) => write(res))
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  try {
    return await new Promise((resolve, reject) => {
      const req = request({ port: (server.address() as AddressInfo).port, host: '127.0.0.1' }, (res) => {
        let body = ''
        res.setEncoding('utf8').on('data', (c: string) => (body += c)).on('end', () => {
          const headers: string[] = []
          for (let i = 0; i < res.rawHeaders.length; i += 2) {
            if (!['date', 'connection', 'keep-alive'].includes(res.rawHeaders[i]!.toLowerCase())) headers.push(res.rawHeaders[i]!, res.rawHeaders[i + 1]!)
          }
          resolve({ status: res.statusCode!, headers, body })
        })
      })
      req.on('error', reject).end()
    })
  } finally {
    server.close()
  }
}

for (const [name, d] of CASES) {
  for (const exposeReason of [true, false]) {
    test(`reject (${name}, exposeReason ${exposeReason}) matches sendRejection`, async () => {
      const extra = ['X-Fairvisor-Debug-Decision', 'reject']
      const got = decisionResponse(d, { exposeReason, extra })
      const sent = await wire((res) => sendRejection(res, d, exposeReason, extra))
      assert.deepEqual({ status: got.status, headers: got.headers, body: got.body }, sent)
    })
  }
}

test('allow carries the headers allowHeaders gives, and an empty body', () => {
  const allowed: Decision = { ...base, allowed: true, status: 200, reason: 'all_rules_passed', limit: { ...limit, remaining: 4 } }
  assert.deepEqual(decisionResponse(allowed, { exposeReason: true }), { status: 200, headers: allowHeaders(allowed), body: '' })
  const warned: Decision = { ...allowed, warning: 'budget_80' as Decision['warning'] }
  assert.deepEqual(decisionResponse(warned, { exposeReason: true }).headers, allowHeaders(warned))
  const bare: Decision = { ...base, allowed: true, status: 200, reason: 'no_matching_policy' }
  assert.equal(allowHeaders(bare), undefined)
  assert.deepEqual(decisionResponse(bare, { exposeReason: true }), { status: 200, headers: [], body: '' })
})

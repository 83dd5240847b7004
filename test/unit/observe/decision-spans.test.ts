/**
 * The deciders wrapped for traces, on the real SDK and a real OTLP receiver: an untraced request goes
 * through untouched (same input, same continuation: nothing made for it); a traced one gets a decision
 * span under its parent, which the engine's store call goes under, with what was decided on it.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { trace } from '@opentelemetry/api'
import type { Decide, DecideLimits } from '../../../src/decision/decide.js'
import type { Decision, LlmReservation } from '../../../src/engine/decision.js'
import type { Settlement } from '../../../src/llm/exchange.js'
import { actionOf, settledAttributes, tracedDecide, tracedDecideLimits } from '../../../src/observe/decision-spans.js'
import { parentFromRaw, SpanKind, startSpan, startTracing, under } from '../../../src/observe/tracing.js'
import type { RequestInput } from '../../../src/request/view.js'
import { startOtlpReceiver, type OtlpReceiver } from '../../helpers/otlp-receiver.js'

const input: RequestInput = { method: 'GET', path: '/a', rawQuery: '', host: 'h', rawHeaders: [], peer: '' }
const REJECT: Decision = {
  allowed: false,
  status: 429,
  reason: 'token_bucket_exceeded',
  mode: 'enforce',
  policyId: 'api',
  ruleName: 'per_user',
  matchedPolicies: ['api'],
}
const reservation = (reserved: number) => ({ reserved }) as LlmReservation

describe('decision spans', () => {
  let receiver: OtlpReceiver
  let stop: () => Promise<void>
  before(async () => {
    receiver = await startOtlpReceiver()
    stop = (await startTracing(
      { otlpTracesUrl: `${receiver.endpoint}/v1/traces`, serviceName: 'unit', sampler: 'parentbased_always_on', samplerRatio: 1 },
      undefined,
    ))!
  })
  after(() => receiver.close())

  test('actionOf: allow, delay, reject', () => {
    assert.equal(actionOf(REJECT), 'reject')
    assert.equal(actionOf({ ...REJECT, allowed: true, status: 200 }), 'allow')
    assert.equal(actionOf({ ...REJECT, allowed: true, status: 200, delayMs: 40 }), 'delay')
  })

  test('an untraced request is decided as it is: the same input and continuation reach the decider', () => {
    const seen: unknown[] = []
    const decide: Decide = (i, c, then) => void seen.push(i, c, then)
    const then = (): void => {}
    tracedDecide(decide, { store: 'memory', worker: 1 })(input, false, then)
    assert.deepEqual(seen, [input, false, then])
    assert.equal(seen[0], input)
    assert.equal(seen[2], then)
    const asked: unknown[][] = []
    const limits: DecideLimits = (...args) => void asked.push(args)
    tracedDecideLimits(limits, { store: 'memory', worker: 1 })(undefined, [], then)
    assert.equal(asked[0]![2], then)
  })

  test('a traced one: its decision span under its parent, the decider handed that span, what was decided on it', async () => {
    const parent = parentFromRaw(['traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'])
    const server = startSpan('GET', SpanKind.SERVER, parent)
    let handed: RequestInput | undefined
    const decide: Decide = (i, _c, then) => {
      handed = i
      then({ ...REJECT, allowed: true, status: 200, reason: 'all_rules_passed', delayMs: 25, llm: [reservation(300), reservation(120)] })
    }
    let decided: Decision | undefined
    tracedDecide(decide, { store: 'redis', worker: 2 })({ ...input, trace: under(parent, server) }, false, (d) => (decided = d))
    assert.equal(decided?.reason, 'all_rules_passed')

    const limits: DecideLimits = (_t, _l, then, _c, ctx) => {
      assert.ok(trace.getSpan(ctx!)?.isRecording())
      then(REJECT, undefined)
    }
    tracedDecideLimits(limits, { store: 'redis', worker: 2 })(undefined, [], () => {}, true, under(parent, server))
    settledAttributes(under(parent, server), [{ used: 180 }, { used: 175 }] as Settlement[])
    server.end()
    await stop()

    const decisions = receiver.spans.filter((s) => s.name === 'fairvisor.decision')
    assert.equal(decisions.length, 2)
    const id = server.spanContext().spanId
    for (const d of decisions) assert.equal(d.parentSpanId, id)
    assert.equal(trace.getSpan(handed!.trace!)?.spanContext().spanId, decisions[0]!.spanId, 'the store call goes under the decision')
    assert.deepEqual(decisions[0]!.attributes, {
      'fairvisor.store': 'redis',
      'fairvisor.worker': 2,
      'fairvisor.action': 'delay',
      'fairvisor.reason': 'all_rules_passed',
      'fairvisor.mode': 'enforce',
      'fairvisor.fail_open': false,
      'fairvisor.policy': 'api',
      'fairvisor.rule': 'per_user',
      'fairvisor.delay_ms': 25,
      'fairvisor.llm.tokens_reserved': 300,
    })
    assert.deepEqual(
      [decisions[1]!.attributes['fairvisor.action'], decisions[1]!.attributes['fairvisor.reason']],
      ['reject', 'token_bucket_exceeded'],
    )
    assert.equal(receiver.spans.find((s) => s.spanId === id)!.attributes['fairvisor.llm.tokens_settled'], 180)
  })
})

/**
 * OTEL_TRACES_SAMPLER as the gateway builds it, asked what the SDK asks it: a parent-based sampler
 * follows a remote parent's decision whatever its ratio, and applies its own to a trace started here.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ROOT_CONTEXT, SpanKind, trace, TraceFlags } from '@opentelemetry/api'
import { SamplingDecision } from '@opentelemetry/sdk-trace-base'
import { samplerOf } from '../../../src/observe/tracing-sdk.js'
import { SAMPLERS, type SamplerName } from '../../../src/settings-trace.js'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const parent = (sampled: boolean) =>
  trace.setSpanContext(ROOT_CONTEXT, {
    traceId: TRACE,
    spanId: '00f067aa0ba902b7',
    traceFlags: sampled ? TraceFlags.SAMPLED : 0,
    isRemote: true,
  })

/** Whether a span would be kept: at the root, under a sampled parent, under an unsampled one. */
function kept(name: SamplerName, ratio: number): [boolean, boolean, boolean] {
  const s = samplerOf(name, ratio)
  const ask = (ctx: typeof ROOT_CONTEXT) =>
    s.shouldSample(ctx, TRACE, 'GET', SpanKind.SERVER, {}, []).decision === SamplingDecision.RECORD_AND_SAMPLED
  return [ask(ROOT_CONTEXT), ask(parent(true)), ask(parent(false))]
}

describe('samplerOf', () => {
  test('every sampler the settings take', () => {
    assert.deepEqual(
      SAMPLERS.map((n) => [n, kept(n, 1)]),
      [
        ['parentbased_always_on', [true, true, false]],
        ['parentbased_always_off', [false, true, false]],
        ['parentbased_traceidratio', [true, true, false]],
        ['always_on', [true, true, true]],
        ['always_off', [false, false, false]],
        ['traceidratio', [true, true, true]],
      ],
    )
  })

  test('a ratio of 0 keeps no trace started here, and still every sampled parent when parent-based', () => {
    assert.deepEqual(kept('parentbased_traceidratio', 0), [false, true, false])
    assert.deepEqual(kept('traceidratio', 0), [false, false, false])
  })
})

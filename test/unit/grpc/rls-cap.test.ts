/**
 * The descriptor count read from a ShouldRateLimit request's bytes before
 * they are decoded (grpc/rls-cap.ts): for any request the encoder writes it
 * is the number of descriptors the decoder would give, up to the bound it
 * stops past; on bytes that are not a message it ends without throwing; and
 * counting a 4 MiB message costs milliseconds where decoding it costs
 * hundreds of them.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import fc from 'fast-check'
import { method } from '../../../src/grpc/protos.js'
import { countDescriptors, descriptorCap } from '../../../src/grpc/rls-cap.js'
import { GrpcStatus } from '../../../src/grpc/status.js'
import { MAX_MESSAGE_BYTES } from '../../../src/grpc/wire.js'
import { SettingError } from '../../../src/errors.js'
import { loadSettings } from '../../../src/settings.js'

const RLS = method('envoy.service.ratelimit.v3.RateLimitService', 'ShouldRateLimit')

const entry = fc.record({
  key: fc.string({ minLength: 1, maxLength: 20 }),
  value: fc.option(fc.string({ maxLength: 300 }), { nil: undefined }),
})
const descriptor = fc.record({
  entries: fc.array(entry, { maxLength: 4 }),
  hits_addend: fc.option(fc.record({ value: fc.nat() }), { nil: undefined }),
  limit: fc.option(fc.record({ requests_per_unit: fc.nat(), unit: fc.nat({ max: 7 }) }), { nil: undefined }),
})
const request = fc.record({
  domain: fc.option(fc.string({ maxLength: 200 }), { nil: undefined }),
  descriptors: fc.array(descriptor, { maxLength: 40 }),
  hits_addend: fc.option(fc.nat(), { nil: undefined }),
})

describe('descriptors counted on the wire', () => {
  test('equal to what the decoder gives, for any request, up to one past the bound', () => {
    fc.assert(
      fc.property(request, fc.nat({ max: 50 }), (req, bound) => {
        const bytes = RLS.encodeRequest(req)
        const decoded = (RLS.decode(bytes) as { descriptors?: unknown[] }).descriptors?.length ?? 0
        assert.equal(countDescriptors(bytes, 1_000_000), decoded)
        assert.equal(countDescriptors(bytes, bound), Math.min(decoded, bound + 1))
      }),
      { numRuns: 500 },
    )
  })

  test('fields the message does not define, with tags of several bytes, are stepped over', () => {
    const varint = (x: number): number[] => {
      const out: number[] = []
      for (; x >= 0x80; x = Math.floor(x / 128)) out.push((x % 128) | 0x80)
      return [...out, x]
    }
    const unknown = Buffer.from([
      ...varint((1000 << 3) | 0),
      ...varint(2 ** 40),
      ...varint((2000 << 3) | 2),
      3,
      0x12,
      0x12,
      0x12, // a length-delimited field whose bytes look like descriptor tags
      ...varint((3000 << 3) | 1),
      ...Array(8).fill(0x12),
      ...varint((4000 << 3) | 5),
      ...Array(4).fill(0x12),
    ])
    const known = RLS.encodeRequest({ domain: 'd', descriptors: [{ entries: [{ key: 'a' }] }, { entries: [{ key: 'b' }] }] })
    for (const bytes of [Buffer.concat([unknown, known]), Buffer.concat([known, unknown])]) {
      assert.equal((RLS.decode(bytes) as { descriptors: unknown[] }).descriptors.length, 2)
      assert.equal(countDescriptors(bytes, 100), 2)
    }
  })

  test('bytes that are not a message end the count without a throw', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (b) => {
        const n = countDescriptors(b, 1000)
        assert.ok(Number.isInteger(n) && n >= 0 && n <= b.length)
      }),
      { numRuns: 2000 },
    )
    // Cut inside a descriptor's length, inside a tag, and a group wire type.
    assert.equal(countDescriptors(Uint8Array.from([0x12, 0x80]), 10), 0)
    assert.equal(countDescriptors(Uint8Array.from([0x12, 0x00, 0x92]), 10), 1)
    assert.equal(countDescriptors(Uint8Array.from([0x12, 0x00, 0x13, 0x12, 0x00]), 10), 1)
  })

  test('the refusal: RESOURCE_EXHAUSTED naming the setting, counted, only past the bound', () => {
    let refused = 0
    const refuse = descriptorCap(3, () => refused++)
    const of = (n: number): Buffer =>
      RLS.encodeRequest({ domain: 'd', descriptors: Array.from({ length: n }, () => ({ entries: [{ key: 'k', value: 'v' }] })) })
    assert.equal(refuse(of(3)), undefined)
    const f = refuse(of(4))
    assert.equal(f?.code, GrpcStatus.RESOURCE_EXHAUSTED)
    assert.match(f!.details, /more than 3 descriptors .*FAIRVISOR_RLS_MAX_DESCRIPTORS/)
    assert.equal(refused, 1)
  })

  test('a 4 MiB message of one-entry descriptors is counted past a bound of 256 in well under its decoding time', (t) => {
    const n = Math.floor((MAX_MESSAGE_BYTES - 16) / 7) // 7 bytes each: field tag and length, entry tag and length, key
    const bytes = RLS.encodeRequest({ domain: 'd', descriptors: Array.from({ length: n }, () => ({ entries: [{ key: 'k' }] })) })
    assert.ok(bytes.length <= MAX_MESSAGE_BYTES && bytes.length > MAX_MESSAGE_BYTES - 64, `${bytes.length} bytes`)
    let t0 = performance.now()
    assert.equal(countDescriptors(bytes, 256), 257)
    const early = performance.now() - t0
    t0 = performance.now()
    assert.equal(countDescriptors(bytes, Number.MAX_SAFE_INTEGER), n, 'the whole message walked')
    const whole = performance.now() - t0
    t0 = performance.now()
    RLS.decode(bytes)
    const decode = performance.now() - t0
    t.diagnostic(
      `${bytes.length} bytes, ${n} descriptors: past 256 in ${early.toFixed(3)} ms, all counted in ${whole.toFixed(1)} ms, decoded in ${decode.toFixed(0)} ms`,
    )
    assert.ok(early < 5, `stopped past the bound in ${early.toFixed(2)} ms`)
    assert.ok(whole < decode / 4, `walking every descriptor took ${whole.toFixed(1)} ms, decoding ${decode.toFixed(0)} ms`)
  })
})

test('FAIRVISOR_RLS_MAX_DESCRIPTORS: 256 by default, an integer from 1 to 1000000', () => {
  const base = { FAIRVISOR_MODE: 'decision_service' }
  assert.equal(loadSettings(base).rlsMaxDescriptors, 256)
  assert.equal(loadSettings({ ...base, FAIRVISOR_RLS_MAX_DESCRIPTORS: '1000000' }).rlsMaxDescriptors, 1_000_000)
  for (const bad of ['0', '1000001', '-1', 'many', '1.5'])
    assert.throws(
      () => loadSettings({ ...base, FAIRVISOR_RLS_MAX_DESCRIPTORS: bad }),
      (e: Error) => e instanceof SettingError && e.message.includes('FAIRVISOR_RLS_MAX_DESCRIPTORS'),
      bad,
    )
})

/**
 * The dynamic_metadata of a ShouldRateLimit answer, as envoyproxy/ratelimit
 * builds it (its ratelimitToMetadata): the request's domain, descriptors and
 * hits_addend, and the passed limits' metadata merged, the first value of a
 * field kept, structs merged field by field, the configuration's own never
 * changed.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { dynamicMetadata, mergeStruct, overrideText, toStruct, toValue, type Struct } from '../../../src/decision/rls-metadata.js'

test('YAML values as Struct values: numbers, strings, booleans, null, lists and mappings', () => {
  assert.deepEqual(toValue(3), { numberValue: 3 })
  assert.deepEqual(toValue('a'), { stringValue: 'a' })
  assert.deepEqual(toValue(false), { boolValue: false })
  assert.deepEqual(toValue(null), { nullValue: 0 })
  assert.deepEqual(toValue([1, { a: 'b' }]), {
    listValue: { values: [{ numberValue: 1 }, { structValue: { fields: { a: { stringValue: 'b' } } } }] },
  })
  // A key `__proto__` is a field like another, not the object's prototype.
  const s = toStruct(JSON.parse('{"__proto__": {"x": 1}, "y": 2}'))
  assert.deepEqual(Object.keys(s.fields), ['__proto__', 'y'])
  assert.equal(Object.getPrototypeOf(s.fields), Object.prototype)
})

test('merged as upstream merges: the first value of a field stays, structs are merged; the sources are not changed', () => {
  const first = toStruct({ name: 'service_1', svc: { tier: 'a' }, list: [1] })
  const second = toStruct({ name: 'service_2', svc: { tier: 'b', zone: 'z' }, list: [2], other: true })
  const firstCopy = structuredClone(first)
  const secondCopy = structuredClone(second)
  const merged: Struct = { fields: {} }
  mergeStruct(merged, first)
  mergeStruct(merged, second)
  assert.deepEqual(merged, toStruct({ name: 'service_1', svc: { tier: 'a', zone: 'z' }, list: [1], other: true }))
  // envoyproxy/ratelimit merges into the first limit's own struct (its configuration then keeps `zone`); not here.
  assert.deepEqual(first, firstCopy)
  assert.deepEqual(second, secondCopy)
})

test("a limit override as Go's protobuf text prints it", () => {
  assert.equal(overrideText({ requests_per_unit: 10, unit: 4 }), 'requests_per_unit:10 unit:DAY')
  assert.equal(overrideText({ requests_per_unit: 42, unit: 3 }), 'requests_per_unit:42 unit:HOUR')
  assert.equal(overrideText({ unit: 7 }), 'unit:WEEK', 'a zero field is left out')
  assert.equal(overrideText({}), '')
})

test("the request's domain, descriptors (entries, limit, own hitsAddend) and hitsAddend; the passed metadata merged", () => {
  const req = {
    domain: 'quota-domain',
    descriptors: [
      { entries: [{ key: 'regular', value: 'limit' }] },
      {
        entries: [
          { key: 'a', value: '' },
          { key: 'b', value: 'c' },
        ],
        limit: { requests_per_unit: 5, unit: 2 },
        hits_addend: {},
      },
    ],
    hits_addend: 3,
  }
  const passed = [toStruct({ name: 'service_1' }), toStruct({ name: 'service_2', some_other_name: 'service_2' })]
  assert.deepEqual(
    dynamicMetadata(req, passed),
    toStruct({
      domain: 'quota-domain',
      descriptors: [{ entries: ['regular=limit'] }, { entries: ['a=', 'b=c'], limit: 'requests_per_unit:5 unit:MINUTE', hitsAddend: 0 }],
      hitsAddend: 3,
      metadata: { name: 'service_1', some_other_name: 'service_2' },
    }),
  )
})

test('no hitsAddend for a request count of 0, no metadata when nothing passed or none has any', () => {
  const req = { domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }], hits_addend: { value: 2 } }] }
  const expected = toStruct({ domain: 'd', descriptors: [{ entries: ['k=v'], hitsAddend: 2 }] })
  assert.deepEqual(dynamicMetadata(req, []), expected)
  assert.deepEqual(dynamicMetadata({ ...req, hits_addend: 0 }, [toStruct({})]), expected)
})

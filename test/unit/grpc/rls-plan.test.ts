/**
 * A call's descriptors planned for the engine: one limit per counted
 * descriptor with its own cost and counter-key part; `unlimited` answered
 * without a check; `replaces` removing the named limit; no limit, no check;
 * a descriptor's limit override in place of the configuration's.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { noLimitStatus } from '../../../src/decision/rls-answer.js'
import { compileRls } from '../../../src/grpc/rls-compile.js'
import { parseRlsYaml, type Unit } from '../../../src/grpc/rls-config.js'
import { planDescriptors } from '../../../src/grpc/rls-plan.js'
import { ROOT } from '../../helpers/processes.js'

const rls = compileRls(parseRlsYaml(readFileSync(join(ROOT, 'test/fixtures/rls/readme-examples.yaml'), 'utf8'), 'x.yaml'))
/** A descriptor of `hits` whose entries are the key, value pairs `kv`. */
function d(hits: number, ...kv: string[]): { entries: Array<{ key: string; value: string }>; hits: number } {
  const entries = []
  for (let i = 0; i < kv.length; i += 2) entries.push({ key: kv[i]!, value: kv[i + 1]! })
  return { entries, hits }
}

test('each counted descriptor is a limit of its own cost; the counter key is the prefix and its entries', () => {
  const statuses = [noLimitStatus(), noLimitStatus(), noLimitStatus()]
  const planned = planDescriptors(
    rls.get('messaging')!,
    [d(2, 'message_type', 'marketing', 'to_number', '1'), d(1, 'nope', 'x'), d(7, 'to_number', '1')],
    statuses,
  )
  assert.deepEqual(
    planned.map((p) => [p.index, p.rule.counterPrefix + p.composite, p.cost, p.shadow]),
    [
      [0, 'rls:messaging_message_type_marketing_to_number_1', 2, false],
      [2, 'rls:messaging_to_number_1', 7, false],
    ],
  )
  assert.deepEqual(statuses, [noLimitStatus(), noLimitStatus(), noLimitStatus()])
})

test('unlimited: no limit for the engine, the status answered here', () => {
  const statuses = [noLimitStatus(), noLimitStatus()]
  const planned = planDescriptors(rls.get('internal')!, [d(1_000_000, 'ldap', 'x'), d(1, 'azure', 'y')], statuses)
  assert.deepEqual(
    planned.map((p) => p.index),
    [1],
  )
  assert.deepEqual(statuses[0], { code: 1, limit_remaining: 0xffffffff })
})

test('replaces: the named limit is neither checked nor reported; alone, it is', () => {
  const e7 = rls.get('example7')!
  const both = planDescriptors(e7, [d(1, 'key1', 'value1'), d(1, 'key2', 'value2')], [noLimitStatus(), noLimitStatus()])
  assert.deepEqual(
    both.map((p) => p.index),
    [1],
  )
  const alone = planDescriptors(e7, [d(1, 'key1', 'value1')], [noLimitStatus()])
  assert.deepEqual(
    alone.map((p) => p.rule.name),
    ['global'],
  )
})

test('share_threshold: every value a wildcard matches counts under one key with the pattern; others under their value', () => {
  const upstream = compileRls(
    parseRlsYaml(readFileSync(join(ROOT, 'test/fixtures/rls/upstream/share_threshold.yaml'), 'utf8'), 'x.yaml'),
  ).get('test-domain')!
  const statuses = [noLimitStatus(), noLimitStatus(), noLimitStatus(), noLimitStatus()]
  const planned = planDescriptors(
    upstream,
    [d(1, 'files', 'files/a'), d(1, 'files', 'files/b'), d(1, 'path', 'path/x', 'file', 'file/y', 'type', 't'), d(1, 'file', 'test1')],
    statuses,
  )
  assert.deepEqual(
    planned.map((p) => p.rule.counterPrefix + p.composite),
    [
      'rls:test-domain_files_files/*',
      'rls:test-domain_files_files/*',
      'rls:test-domain_path_path/*_file_file/y_type_t',
      'rls:test-domain_file_test1',
    ],
  )
})

/** `d(…)` with a limit override. */
const over = (requestsPerUnit: number, unit: Unit, ...kv: string[]) => ({ ...d(1, ...kv), limit: { requestsPerUnit, unit } })

test("a limit override: in place of the configured limit, or of none, as upstream's TestConfigLimitOverride", () => {
  const e7 = rls.get('example7')!
  const statuses = [noLimitStatus(), noLimitStatus(), noLimitStatus()]
  const planned = planDescriptors(
    e7,
    // key1_value1 is `global` (3 an hour), replaced by key2_value2's limit unless that is overridden; nope has none.
    [over(10, 'day', 'key1', 'value1'), over(42, 'hour', 'key2', 'value2'), over(5, 'second', 'nope', 'x')],
    statuses,
  )
  assert.deepEqual(
    planned.map((p) => [p.index, p.answer.current, p.rule.counterPrefix + p.composite, p.shadow]),
    [
      [0, { requests_per_unit: 10, unit: 4 }, 'rls@day:example7_key1_value1', false],
      // The configured limit of key2_value2 is an hour too: its counter.
      [1, { requests_per_unit: 42, unit: 3 }, 'rls:example7_key2_value2', false],
      [2, { requests_per_unit: 5, unit: 1 }, 'rls@second:example7_nope_x', false],
    ],
  )
  // An overridden limit does not replace others; a named one is still replaced by a configured one that does.
  const replaced = planDescriptors(e7, [over(10, 'hour', 'key1', 'value1'), d(1, 'key2', 'value2')], [noLimitStatus(), noLimitStatus()])
  assert.deepEqual(
    replaced.map((p) => p.index),
    [0, 1],
  )
})

test('a limit override on an unlimited or shadow_mode limit is counted, and never shadow; on no entries, counted on the domain', () => {
  const c = compileRls(parseRlsYaml(readFileSync(join(ROOT, 'test/fixtures/rls/readme-examples.yaml'), 'utf8'), 'x.yaml'))
  const statuses = [noLimitStatus(), noLimitStatus()]
  const internal = planDescriptors(
    c.get('internal')!,
    [over(1, 'minute', 'ldap', 'x'), { entries: [], hits: 2, limit: { requestsPerUnit: 3, unit: 'minute' } }],
    statuses,
  )
  assert.deepEqual(
    internal.map((p) => [p.rule.counterPrefix + p.composite, p.cost]),
    [
      ['rls@minute:internal_ldap_x', 1],
      ['rls@minute:internal_', 2],
    ],
  )
  assert.deepEqual(statuses, [noLimitStatus(), noLimitStatus()])
  const shadow = planDescriptors(c.get('example6')!, [over(10, 'second', 'remote_address', 'a')], [noLimitStatus()])
  assert.deepEqual(
    shadow.map((p) => [p.rule.counterPrefix + p.composite, p.shadow, p.answer.shadow]),
    [['rls:example6_remote_address_a', false, false]],
  )
})

test('a limit override on a share_threshold wildcard counts on the value itself', () => {
  const upstream = compileRls(
    parseRlsYaml(readFileSync(join(ROOT, 'test/fixtures/rls/upstream/share_threshold.yaml'), 'utf8'), 'x.yaml'),
  ).get('test-domain')!
  const planned = planDescriptors(
    upstream,
    [over(3, 'hour', 'files', 'files/a'), d(1, 'files', 'files/a')],
    [noLimitStatus(), noLimitStatus()],
  )
  assert.deepEqual(
    planned.map((p) => p.rule.counterPrefix + p.composite),
    ['rls@hour:test-domain_files_files/a', 'rls:test-domain_files_files/*'],
  )
})

test('shadowAll (SHADOW_MODE): every check is shadow for the engine; the answer still says its own', () => {
  const planned = planDescriptors(
    rls.get('messaging')!,
    [d(1, 'to_number', '1'), over(1, 'day', 'to_number', '2')],
    [noLimitStatus(), noLimitStatus()],
    true,
  )
  assert.deepEqual(
    planned.map((p) => [p.shadow, p.answer.shadow]),
    [
      [true, false],
      [true, false],
    ],
  )
})

// Cluster specifics on a 3-master cluster this file owns: our slot function
// agrees with CLUSTER KEYSLOT, a request spanning slots is refunded when a
// later slot rejects, and cross-slot requests never over-grant.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { RedisClusterStore } from '../../src/store/redis/cluster.js'
import keySlot from 'cluster-key-slot'
import { parseRedisUrl } from '../../src/store/redis/url.js'
import { startCluster, type RedisCluster } from '../helpers/redis-servers.js'
import { applyAsync, tbCheck } from '../helpers/store.js'

const tb = tbCheck

describe('redis cluster store', () => {
  let cluster: RedisCluster
  let store: RedisClusterStore
  before(async () => {
    cluster = await startCluster()
    store = new RedisClusterStore({ target: parseRedisUrl(cluster.url), timeoutMs: 1000 })
    assert.equal(await store.ready(5000), true)
  })
  after(async () => {
    await store?.close()
    await cluster?.stop()
  })

  it('computes the same slot as CLUSTER KEYSLOT (hash tags, UTF-8)', () => {
    for (const k of ['tb:r:alice', 'tb:r:{user1}:x', 'tb:r:{}:x', 'tb:r:{a', 'shadow:tb:r:ünïcødé|10.0.0.1', 'tb:r:}{x}', 'x{y}z{w}']) {
      assert.equal(keySlot(k), Number(cluster.cli(cluster.ports[0]!, 'cluster', 'keyslot', k)), k)
    }
  })

  it('a reject on one slot refunds what another slot took', async () => {
    const a = 'tb:refund:a'
    let b = 'tb:refund:b0'
    for (let i = 1; keySlot(b) === keySlot(a); i++) b = `tb:refund:b${i}`
    await applyAsync(store, [tb(b, 1, 0.001)], 0) // exhaust b
    const before = store.refunds
    const r = await applyAsync(store, [tb(a, 10, 0.001, 3), tb(b, 1, 0.001)], 0)
    assert.equal(r[0]!.allowed, true)
    assert.equal(r[1]!.allowed, false)
    assert.equal(store.refunds, before + 1)
    await new Promise((res) => setTimeout(res, 20))
    const [o] = await applyAsync(store, [tb(a, 10, 0.001, 1)], 0)
    assert.ok(Math.abs(o!.value - 9) < 0.01, `a got its 3 tokens back: ${o!.value}`)
  })

  it('commands per request: one EVALSHA per slot touched, nothing else on the allow path', async () => {
    const a = 'tb:cpr:a'
    let other = 'tb:cpr:b0'
    for (let i = 1; keySlot(other) === keySlot(a); i++) other = `tb:cpr:b${i}`
    let same = 'tb:cpr:c0'
    for (let i = 1; keySlot(same) !== keySlot(a); i++) same = `tb:cpr:c${i}`
    await applyAsync(store, [tb(a, 1e6, 1e6), tb(other, 1e6, 1e6)], 0) // scripts cached on both nodes
    const calls = (): Map<string, number> => {
      const out = new Map<string, number>()
      for (const p of cluster.ports) {
        for (const m of cluster.cli(p, 'info', 'commandstats').matchAll(/cmdstat_([^:]+):calls=(\d+)/g))
          out.set(m[1]!, (out.get(m[1]!) ?? 0) + Number(m[2]))
      }
      return out
    }
    const sent = (before: Map<string, number>): Record<string, number> => {
      const d: Record<string, number> = {}
      for (const [k, v] of calls())
        if (!['info', 'time', 'get', 'psetex', 'cluster'].includes(k) && v !== (before.get(k) ?? 0)) d[k] = v - (before.get(k) ?? 0)
      return d
    }
    let before = calls()
    for (let i = 0; i < 20; i++) await applyAsync(store, [tb(a, 1e6, 1e6)], 0)
    assert.deepEqual(sent(before), { evalsha: 20 }, 'one slot: one call per request')
    before = calls()
    for (let i = 0; i < 20; i++) await applyAsync(store, [tb(a, 1e6, 1e6), tb(same, 1e6, 1e6)], 0)
    assert.deepEqual(sent(before), { evalsha: 20 }, 'two keys in one slot: still one call')
    before = calls()
    for (let i = 0; i < 20; i++) await applyAsync(store, [tb(a, 1e6, 1e6), tb(other, 1e6, 1e6)], 0)
    assert.deepEqual(sent(before), { evalsha: 40 }, 'two slots: one call each')
  })

  it('concurrent cross-slot requests: exactly burst granted, the other slot charged only for those', async () => {
    const hot = 'tb:xs:hot'
    const keys = ['tb:xs:u1', 'tb:xs:u2', 'tb:xs:u3', 'tb:xs:u4']
    const res = await Promise.all(
      Array.from({ length: 200 }, (_, i) => applyAsync(store, [tb(keys[i % 4]!, 1000, 0.001), tb(hot, 40, 0.001)], 0)),
    )
    const ok = res.filter((r) => r[1]?.allowed)
    assert.equal(ok.length, 40)
    await new Promise((r) => setTimeout(r, 50)) // refunds are not awaited by apply
    let charged = 0
    for (const k of keys) {
      const [o] = await applyAsync(store, [tb(k, 1000, 0.001, 0.5)], 0)
      charged += 1000 - 0.5 - o!.value
    }
    assert.ok(Math.abs(charged - 40) < 0.05, `user keys charged ${charged} for 40 allowed requests`)
  })
})

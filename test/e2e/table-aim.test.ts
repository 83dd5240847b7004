/**
 * A client cannot make the in-process table forget its counter (the real
 * gateway, two worker threads over the shared table of the default 128m).
 * A per-IP limit of 2 on /api; /tags is limited per `x-tag`, a value the
 * client chooses, with counters that live far longer than the per-IP one.
 * The client alternates its real key with 10,000 junk tags. The first 48
 * are aimed: they share the per-IP key's bucket under the placement hash
 * the table used before (a fixed public hash, reproduced here), where each
 * junk counter past the bucket's 16 slots evicted the counter closest to
 * expiry: the client's spent per-IP bucket, refilled for it at once. With
 * placement keyed by a secret seed there is nothing to aim at, and no live
 * counter is dropped for another key anyway: the client gets its 2 requests.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { Agent, request } from 'undici'
import { metricValue, startBackend, startGateway } from '../helpers/processes.js'

const TABLE_BYTES = 128 * 2 ** 20
const REAL_KEY = 'tb:per_ip:127.0.0.1'
const JUNK = 10_000
const AIMED = 48

/** The bucket the table picked before: FNV-1a over the UTF-16 code units, avalanched, modulo the bucket count. */
function oldBucket(key: string, buckets: number): number {
  let h = 0x811c9dc5
  for (let j = 0; j < key.length; j++) h = Math.imul(h ^ key.charCodeAt(j), 0x01000193)
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return (h >>> 0) % buckets
}

/** Bucket count of a table of `bytes`: a 64-byte header, 16 slots of 48 bytes and a lock word per bucket. */
const buckets = Math.floor((TABLE_BYTES - 64) / (16 * 48 + 4))

/** `n` x-tag values whose counter keys (`tb:per_tag:<value>`) shared the real key's bucket under the old hash. */
function aimedTags(n: number): string[] {
  const target = oldBucket(REAL_KEY, buckets)
  const out: string[] = []
  for (let i = 0; out.length < n; i++) if (oldBucket(`tb:per_tag:a${i}`, buckets) === target) out.push(`a${i}`)
  return out
}

const dir = mkdtempSync(join(tmpdir(), 'fv-aim-'))
after(() => rmSync(dir, { recursive: true, force: true }))

test('10,000 junk keys, 48 of them aimed at the per-IP counter: the client never gets past its limit of 2', {
  timeout: 60_000,
}, async () => {
  const aimed = aimedTags(AIMED)
  const file = join(dir, 'bundle.json')
  const policy = (id: string, prefix: string, rule: object): object => ({ id, spec: { selector: { pathPrefix: prefix }, rules: [rule] } })
  writeFileSync(
    file,
    JSON.stringify({
      bundle_version: 1,
      policies: [
        policy('api', '/api', {
          name: 'per_ip',
          limit_keys: ['ip:address'],
          algorithm: 'token_bucket',
          algorithm_config: { burst: 2, tokens_per_second: 0.001 },
        }),
        policy('tags', '/tags', {
          name: 'per_tag',
          limit_keys: ['header:x-tag'],
          algorithm: 'token_bucket',
          algorithm_config: { burst: 1000, tokens_per_second: 0.00001 },
        }),
      ],
    }),
  )
  const backend = await startBackend()
  const gw = await startGateway(
    { FAIRVISOR_BACKEND_URL: backend.url, FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_WORKERS: '2', FAIRVISOR_SHARED_TABLE_SIZE: '128m' },
    { timeoutMs: 20_000 },
  )
  const agent = new Agent({ connections: 16 })
  const get = async (path: string, headers: Record<string, string> = {}): Promise<number> => {
    const r = await request(gw.url + path, { headers, dispatcher: agent })
    await r.body.dump()
    return r.statusCode
  }
  try {
    const real: number[] = []
    const junk = new Map<number, number>()
    const spend = async (tag: string): Promise<void> => {
      const s = await get('/tags/x', { 'x-tag': tag })
      junk.set(s, (junk.get(s) ?? 0) + 1)
    }
    for (let i = 0; i < 3; i++) real.push(await get('/api/x'))
    // The aimed tags one at a time, the real key after each (two tries: a fresh bucket would give two).
    for (const tag of aimed) {
      await spend(tag)
      real.push(await get('/api/x'), await get('/api/x'))
    }
    // The rest of the 10,000, 16 at a time, the real key between batches of 256.
    const rest = Array.from({ length: JUNK - AIMED }, () => randomBytes(9).toString('base64url'))
    for (let at = 0; at < rest.length; at += 256) {
      const batch = rest.slice(at, at + 256)
      let next = 0
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < batch.length) await spend(batch[next++]!)
        }),
      )
      real.push(await get('/api/x'))
    }
    const granted = real.filter((s) => s === 200).length
    assert.equal(granted, 2, `the real key was let through ${granted} times in ${real.length} tries`)
    assert.equal(real.filter((s) => s !== 200 && s !== 429).length, 0, `statuses of the real key: ${[...new Set(real)].join(', ')}`)
    // A table of 2.8 million slots has room for every junk key: none refused, so none counted.
    assert.deepEqual([...junk], [[200, JUNK]])
    assert.equal(await metricValue(gw, 'fairvisor_store_full_total'), 0)
  } finally {
    await agent.close()
    await gw.stop()
    await backend.close()
  }
})

// A script error of one request in a pipelined batch (here a limit kind the script does not know)
// fails that request alone; the other requests of the batch get their outcomes.
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Limit } from '../../src/algorithms/algorithm.js'
import { StoreError } from '../../src/errors.js'
import { RedisStore } from '../../src/store/redis/store.js'
import { parseRedisUrl } from '../../src/store/redis/url.js'
import { applyAsync, type Check, type Outcomes } from '../../src/store/store.js'
import { tbCheck } from '../helpers/store.js'
import { deleteKeys } from '../helpers/redis-servers.js'

const URL = process.env.FAIRVISOR_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = `iso-${process.pid}-${Date.now().toString(36)}`
/** A check whose kind id the script has no function for: the script raises an error. */
const broken = (): Check => ({
  key: `tb:${prefix}-broken`,
  limit: { ...tbCheck('x', 1, 1).limit, kind: { ...tbCheck('x', 1, 1).limit.kind, id: 99 } } as Limit,
  cost: 1,
  shadow: false,
})

describe('redis store: a request whose script call fails', () => {
  let store: RedisStore
  before(async () => {
    store = new RedisStore({ target: parseRedisUrl(URL), timeoutMs: 1000 })
    assert.ok(await store.ready(3000), `no Redis at ${URL}`)
  })
  after(async () => {
    await store.close()
    await deleteKeys(URL, `tb:${prefix}-*`)
  })

  it('fails only itself in a pipelined batch of 100; its neighbours are limited exactly', async () => {
    const out = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        applyAsync(store, i % 33 === 5 ? [broken()] : [tbCheck(`tb:${prefix}-victim`, 40, 0.001)], 0).catch(
          (e: Error) => e as Error | Outcomes,
        ),
      ),
    )
    const errors = out.filter((o) => o instanceof Error)
    assert.equal(errors.length, 3, `${errors.length} store errors, first: ${(errors[0] as Error | undefined)?.message}`)
    assert.ok(errors.every((e) => e instanceof StoreError))
    assert.equal(out.filter((o) => !(o instanceof Error) && o[0]!.allowed).length, 40)
  })
})

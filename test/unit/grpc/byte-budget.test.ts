// The gRPC byte budget (grpc/byte-budget.ts) and the settings of the listener's bounds.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { describe, it } from 'node:test'
import { ByteBudget, HeldBody, SMALL_REQUEST_BYTES } from '../../../src/grpc/byte-budget.js'
import { deadlineMs } from '../../../src/grpc/wire.js'
import { SettingError } from '../../../src/errors.js'
import { loadSettings } from '../../../src/settings.js'
import { CLI, ROOT } from '../../helpers/processes.js'

const MiB = 1024 * 1024
const chunk = (n: number): Buffer => Buffer.alloc(n)

describe('ByteBudget', () => {
  it('a large stream stops at seven eighths; a small one may use the rest, never past the limit', () => {
    const b = new ByteBudget(8 * MiB)
    assert.ok(b.take(7 * MiB, SMALL_REQUEST_BYTES))
    assert.equal(b.take(1, SMALL_REQUEST_BYTES), false, 'a large stream past seven eighths')
    // The last eighth, in requests of 64 KiB at most.
    for (let i = 0; i < MiB / SMALL_REQUEST_BYTES; i++) assert.ok(b.take(SMALL_REQUEST_BYTES, 0), `small request ${i}`)
    assert.equal(b.take(1, 0), false, 'nothing past the limit')
    assert.equal(b.held, 8 * MiB, 'a refusal charges nothing')
    b.give(8 * MiB)
    assert.equal(b.held, 0)
  })

  it('workers: one total over a shared buffer; what a worker that ended held is given back', () => {
    const shared = ByteBudget.shared(2)
    const one = new ByteBudget(8 * MiB, shared, 1)
    const two = new ByteBudget(8 * MiB, shared, 2)
    assert.ok(one.take(4 * MiB, SMALL_REQUEST_BYTES))
    assert.ok(two.take(3 * MiB, SMALL_REQUEST_BYTES))
    assert.equal(one.take(1, SMALL_REQUEST_BYTES), false, 'the other worker counts')
    assert.deepEqual([one.held, two.held], [4 * MiB, 3 * MiB])
    assert.equal(ByteBudget.releaseOf(shared, 1), 4 * MiB)
    assert.ok(two.take(4 * MiB, SMALL_REQUEST_BYTES), 'room again')
  })
})

describe('HeldBody', () => {
  it('charges each chunk, gives back once whichever way it ends, and refuses what passes a limit', () => {
    const b = new ByteBudget(8 * MiB)
    const body = new HeldBody(b, 4 * MiB)
    assert.equal(body.add(chunk(MiB)), 'kept')
    assert.equal(body.add(chunk(MiB)), 'kept')
    assert.equal(b.held, 2 * MiB)
    assert.equal(body.take().length, 2 * MiB)
    assert.equal(b.held, 0, 'a whole request is no longer charged')
    body.release()
    assert.equal(b.held, 0, 'released twice, given back once')

    const big = new HeldBody(b, 4 * MiB)
    assert.equal(big.add(chunk(4 * MiB)), 'kept')
    assert.equal(big.add(chunk(1)), 'too-large')
    assert.equal(b.held, 0, 'a refused stream holds nothing')
    const filler = new HeldBody(b, 8 * MiB)
    assert.equal(filler.add(chunk(7 * MiB)), 'kept')
    const late = new HeldBody(b, 4 * MiB)
    assert.equal(late.add(chunk(SMALL_REQUEST_BYTES)), 'kept')
    assert.equal(late.add(chunk(1)), 'budget')
    filler.release()
    assert.equal(b.held, 0)
  })
})

it('grpc-timeout: digits and a unit to milliseconds; anything else is no deadline', () => {
  assert.equal(deadlineMs('250m'), 250)
  assert.equal(deadlineMs('2S'), 2000)
  assert.equal(deadlineMs('1H'), 3_600_000)
  assert.equal(deadlineMs('5000u'), 5)
  assert.equal(deadlineMs('99999999H'), 2 ** 31 - 1, 'what a timer can wait')
  for (const bad of [undefined, '', '250', 'm', '123456789S', '1.5S', '-1S', '1s ']) assert.equal(deadlineMs(bad), undefined, String(bad))
})

describe('settings', () => {
  const base = { FAIRVISOR_MODE: 'decision_service' }
  const rejects = (env: Record<string, string>, name: string): void =>
    assert.throws(
      () => loadSettings({ ...base, ...env }),
      (e: Error) => e instanceof SettingError && e.message.includes(name),
    )

  it('FAIRVISOR_GRPC_MAX_CONCURRENT_STREAMS: 1000 by default, a positive integer', () => {
    assert.equal(loadSettings(base).grpcMaxConcurrentStreams, 1000)
    assert.equal(loadSettings({ ...base, FAIRVISOR_GRPC_MAX_CONCURRENT_STREAMS: '100' }).grpcMaxConcurrentStreams, 100)
    for (const bad of ['0', '-5', 'many', '1.5'])
      rejects({ FAIRVISOR_GRPC_MAX_CONCURRENT_STREAMS: bad }, 'FAIRVISOR_GRPC_MAX_CONCURRENT_STREAMS')
  })

  it('FAIRVISOR_GRPC_MAX_BUFFERED_BYTES: 64m by default, a size from 8m to 1g', () => {
    assert.equal(loadSettings(base).grpcMaxBufferedBytes, 64 * MiB)
    assert.equal(loadSettings({ ...base, FAIRVISOR_GRPC_MAX_BUFFERED_BYTES: '16m' }).grpcMaxBufferedBytes, 16 * MiB)
    assert.equal(loadSettings({ ...base, FAIRVISOR_GRPC_MAX_BUFFERED_BYTES: String(10 * MiB) }).grpcMaxBufferedBytes, 10 * MiB)
    for (const bad of ['4m', '2g', 'lots', '-1m']) rejects({ FAIRVISOR_GRPC_MAX_BUFFERED_BYTES: bad }, 'FAIRVISOR_GRPC_MAX_BUFFERED_BYTES')
  })

  it('a bad value stops the gateway with exit code 2 and one line naming the setting', () => {
    const r = spawnSync(process.execPath, [CLI], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, ...base, FAIRVISOR_PORT: '0', FAIRVISOR_GRPC_PORT: '0', FAIRVISOR_GRPC_MAX_BUFFERED_BYTES: '1k' },
      encoding: 'utf8',
      timeout: 10_000,
    })
    assert.equal(r.status, 2)
    assert.equal(
      r.stderr.trim(),
      'fairvisor: invalid setting FAIRVISOR_GRPC_MAX_BUFFERED_BYTES: "1k" is not a size from 8m to 1g; use bytes or a number with k, m or g (e.g. 64m)',
    )
  })
})

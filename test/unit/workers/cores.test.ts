// FAIRVISOR_WORKERS and FAIRVISOR_SHARED_TABLE_SIZE: defaults, bounds, and the cgroup CPU quota.
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'
import { it } from 'node:test'
import { SettingError } from '../../../src/errors.js'
import { loadSettings } from '../../../src/settings.js'
import { defaultWorkers, quotaCpus } from '../../../src/workers/cores.js'

const base = { FAIRVISOR_MODE: 'decision_service' }

it('a cgroup v2 cpu.max quota bounds the default, rounded up to whole CPUs; "max" or garbage does not', () => {
  assert.equal(quotaCpus('200000 100000\n'), 2)
  assert.equal(quotaCpus('150000 100000'), 2)
  assert.equal(quotaCpus('50000 100000'), 1)
  assert.equal(quotaCpus('max 100000'), undefined)
  assert.equal(quotaCpus('nonsense'), undefined)
  const dir = mkdtempSync(join(tmpdir(), 'fv-cpu-'))
  writeFileSync(join(dir, 'cpu.max'), '100000 100000\n')
  assert.equal(defaultWorkers(join(dir, 'cpu.max')), 1)
  assert.equal(defaultWorkers(join(dir, 'absent')), availableParallelism())
})

it('FAIRVISOR_WORKERS: an integer from 1; the table size defaults to FAIRVISOR_SHARED_DICT_SIZE', () => {
  assert.equal(loadSettings({ ...base, FAIRVISOR_WORKERS: '1' }).workers, 1)
  assert.equal(loadSettings({ ...base, FAIRVISOR_WORKERS: '4' }).workers, 4)
  assert.ok(loadSettings(base).workers >= 1 && loadSettings(base).workers <= availableParallelism())
  assert.throws(
    () => loadSettings({ ...base, FAIRVISOR_WORKERS: '0' }),
    (e: Error) => e instanceof SettingError && /FAIRVISOR_WORKERS/.test(e.message),
  )
  assert.throws(() => loadSettings({ ...base, FAIRVISOR_WORKERS: 'two' }), SettingError)
  assert.equal(loadSettings({ ...base, FAIRVISOR_SHARED_DICT_SIZE: '64m' }).sharedTableBytes, 64 * 1024 * 1024)
  assert.equal(loadSettings({ ...base, FAIRVISOR_SHARED_TABLE_SIZE: '32m' }).sharedTableBytes, 32 * 1024 * 1024)
  assert.throws(
    () => loadSettings({ ...base, FAIRVISOR_SHARED_TABLE_SIZE: 'big' }),
    (e: Error) => /FAIRVISOR_SHARED_TABLE_SIZE/.test(e.message),
  )
})

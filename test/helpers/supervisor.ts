/**
 * The built supervisor (dist/), started in this process with two worker
 * threads on a free port of 127.0.0.1: its workers run the built entry file,
 * as in a deployment, and the test can kill or inspect them directly.
 */
import assert from 'node:assert/strict'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { loadSettings } from '../../src/settings.js'
import type { Supervisor } from '../../src/workers/supervisor.js'

export async function startBuiltSupervisor(env: Record<string, string>): Promise<Supervisor> {
  const full = { FAIRVISOR_WORKERS: '2', FAIRVISOR_HOST: '127.0.0.1', FAIRVISOR_PORT: '0', FAIRVISOR_LOG_LEVEL: 'silent', ...env }
  const mod = (await import(pathToFileURL(resolve('dist/workers/supervisor.js')).href)) as typeof import('../../src/workers/supervisor.js')
  const started = await mod.startSupervisor(loadSettings(full), full)
  assert.notEqual(typeof started, 'number', 'the supervisor started')
  return started as Supervisor
}

/** The admin API's settings (src/settings-admin.ts), alone and through loadSettings. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { SettingError } from '../../src/errors.js'
import { adminSettings, MIN_ADMIN_TOKEN_LENGTH } from '../../src/settings-admin.js'
import { loadSettings } from '../../src/settings.js'

const TOKEN = 't'.repeat(MIN_ADMIN_TOKEN_LENGTH)

test('unset: the admin API is off; the top keys sketch has its defaults', () => {
  assert.deepEqual(adminSettings({}, undefined), { adminToken: undefined, adminTopKeys: 1000, adminTopWindowS: 300 })
})

test('a token with an admin port; sketch size and window in range', () => {
  assert.deepEqual(
    adminSettings({ FAIRVISOR_ADMIN_TOKEN: TOKEN, FAIRVISOR_ADMIN_TOP_KEYS: '50', FAIRVISOR_ADMIN_TOP_WINDOW_S: '60' }, 9091),
    { adminToken: TOKEN, adminTopKeys: 50, adminTopWindowS: 60 },
  )
})

test('refused: a short token, a token without an admin port, sizes out of range', () => {
  const refused = (env: Record<string, string>, port: number | undefined, variable: string, text: RegExp) =>
    assert.throws(
      () => adminSettings(env, port),
      (e: unknown) => e instanceof SettingError && e.variable === variable && text.test(e.message),
    )
  refused({ FAIRVISOR_ADMIN_TOKEN: 'short' }, 9091, 'FAIRVISOR_ADMIN_TOKEN', /at least 16 characters/)
  refused({ FAIRVISOR_ADMIN_TOKEN: TOKEN }, undefined, 'FAIRVISOR_ADMIN_TOKEN', /needs FAIRVISOR_ADMIN_PORT/)
  refused({ FAIRVISOR_ADMIN_TOP_KEYS: '5' }, undefined, 'FAIRVISOR_ADMIN_TOP_KEYS', /out of range/)
  refused({ FAIRVISOR_ADMIN_TOP_WINDOW_S: 'soon' }, undefined, 'FAIRVISOR_ADMIN_TOP_WINDOW_S', /not an integer/)
})

test('loadSettings reads them (so they are known names, not refused as unknown)', () => {
  const s = loadSettings({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_ADMIN_PORT: '0', FAIRVISOR_ADMIN_TOKEN: TOKEN })
  assert.equal(s.adminToken, TOKEN)
  assert.equal(s.adminPort, 0)
  assert.throws(() => loadSettings({ FAIRVISOR_MODE: 'decision_service', FAIRVISOR_ADMIN_TOKEN: TOKEN }), /needs FAIRVISOR_ADMIN_PORT/)
})

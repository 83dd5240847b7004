/**
 * The admin API's settings (docs/admin.md): its bearer token and the size and window of the sketch of
 * rejected keys behind `GET /v1/admin/top`, parsed as settings.ts parses the rest.
 */
import { SettingError } from './errors.js'
import { integer, secret, type Env } from './settings-env.js'

export interface AdminSettings {
  /** FAIRVISOR_ADMIN_TOKEN: the admin API's bearer token; unset, the admin API is off. */
  adminToken: string | undefined
  /** Keys each thread's sketch of rejected keys counts (FAIRVISOR_ADMIN_TOP_KEYS), per half window. Default 1000. */
  adminTopKeys: number
  /** Seconds of rejects `GET /v1/admin/top` covers at most (FAIRVISOR_ADMIN_TOP_WINDOW_S); at least half of it. Default 300. */
  adminTopWindowS: number
}

/** Shortest admin token: anyone holding it can read the bundle and reset any counter. */
export const MIN_ADMIN_TOKEN_LENGTH = 16

/** `adminPort`: FAIRVISOR_ADMIN_PORT's value, without which a token is refused (the API never shares the public listener). */
export function adminSettings(env: Env, adminPort: number | undefined): AdminSettings {
  const adminToken = secret(env, 'FAIRVISOR_ADMIN_TOKEN', MIN_ADMIN_TOKEN_LENGTH)
  if (adminToken !== undefined && adminPort === undefined)
    throw new SettingError(
      'FAIRVISOR_ADMIN_TOKEN',
      'needs FAIRVISOR_ADMIN_PORT: the admin API is served on the admin listener only, never next to traffic',
    )
  return {
    adminToken,
    adminTopKeys: integer(env, 'FAIRVISOR_ADMIN_TOP_KEYS', 1000, 10, 100_000),
    adminTopWindowS: integer(env, 'FAIRVISOR_ADMIN_TOP_WINDOW_S', 300, 10, 86_400),
  }
}

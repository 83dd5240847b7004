/**
 * Readers of one environment variable each: a bad value throws a
 * SettingError naming the variable and what is allowed. Read every setting
 * on every start, whatever the others say: the names read are the known
 * ones, and any other FAIRVISOR_* variable stops start-up (unknown-settings.ts).
 */
import { SettingError } from './errors.js'

export type Env = Record<string, string | undefined>

export function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], dflt: T): T {
  const raw = env[name]
  if (raw === undefined || raw === '') return dflt
  if ((allowed as readonly string[]).includes(raw)) return raw as T
  throw new SettingError(name, `"${raw}" is not allowed; use one of ${allowed.join(', ')}`)
}

export function integer(env: Env, name: string, dflt: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return dflt
  if (!/^\d+$/.test(raw.trim())) throw new SettingError(name, `"${raw}" is not an integer; use an integer from ${min} to ${max}`)
  const n = Number(raw.trim())
  if (n < min || n > max) throw new SettingError(name, `${n} is out of range; use an integer from ${min} to ${max}`)
  return n
}

export function bool(env: Env, name: string, dflt: boolean): boolean {
  const raw = env[name]
  if (raw === undefined || raw === '') return dflt
  const v = raw.trim().toLowerCase()
  if (['1', 'true', 'yes', 'on'].includes(v)) return true
  if (['0', 'false', 'no', 'off'].includes(v)) return false
  throw new SettingError(name, `"${raw}" is not a boolean; use true or false`)
}

/** A boolean the program may choose: unset or `auto` leaves it to the program, else as bool(). */
export function boolOrAuto(env: Env, name: string): boolean | 'auto' {
  const raw = env[name]
  if (raw === undefined || raw === '' || raw.trim().toLowerCase() === 'auto') return 'auto'
  try {
    return bool(env, name, false)
  } catch {
    throw new SettingError(name, `"${raw}" is not allowed; use auto, true or false`)
  }
}

export function optional(env: Env, name: string): string | undefined {
  const raw = env[name]
  return raw === undefined || raw === '' ? undefined : raw
}

/** nginx-style sizes: 128m, 64k, 1g, or plain bytes. */
export function parseSize(raw: string): number | undefined {
  const m = /^\s*(\d+)\s*([kmg]?)b?\s*$/i.exec(raw)
  if (!m) return undefined
  const mult = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g']
  return Number(m[1]) * mult
}

export function size(env: Env, name: string, dflt: string): number {
  const raw = env[name] || dflt
  const n = parseSize(raw)
  if (n === undefined || n < 1024 * 1024)
    throw new SettingError(name, `"${raw}" is not a size of at least 1m; use bytes or a number with k, m or g (e.g. 128m)`)
  return n
}

/** A secret (a signing key, a session secret): at least `min` characters, as HMAC-SHA256 wants ≥ 256 bits. */
export function secret(env: Env, name: string, min: number): string | undefined {
  const raw = optional(env, name)
  if (raw !== undefined && raw.length < min)
    throw new SettingError(name, `is ${raw.length} characters long; use a random string of at least ${min} characters`)
  return raw
}

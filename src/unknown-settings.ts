/**
 * A FAIRVISOR_* variable that is no setting stops start-up (exit 2), with the
 * closest setting's name when one is near: a typo such as FAIRVISOR_WORKER=4
 * would otherwise leave the setting at its default without a word.
 *
 * The known names are the ones the settings readers asked for while the
 * environment was parsed (loadSettings reads it through `recording`), so a
 * setting added the usual way is known without a list to keep. Not settings,
 * and accepted as well: the variables Kubernetes and Docker links define for
 * a service named fairvisor or fairvisor-* (FAIRVISOR_SERVICE_HOST,
 * FAIRVISOR_PORT_80_TCP, …), told apart by their values, and the few below.
 */
import { isIP } from 'node:net'
import { SettingError } from './errors.js'
import type { Env } from './settings-env.js'

/** Read by the project's own test suite, whose environment a test run may pass on to the gateway. */
const NOT_SETTINGS: ReadonlySet<string> = new Set(['FAIRVISOR_TEST_REDIS_URL', 'FAIRVISOR_TEST_PG_URL', 'FAIRVISOR_TEST_PG_BIN'])

/** `env` as the readers see it, with every name they look up added to `read`. */
export function recording(env: Env, read: Set<string>): Env {
  return new Proxy(env, {
    get(target, key) {
      if (typeof key === 'string') read.add(key)
      return Reflect.get(target, key) as unknown
    },
  })
}

const PROTO = /^(?:tcp|udp|sctp)$/
const ENDPOINT = /^(?:tcp|udp|sctp):\/\/\S+:\d+$/
const NUMBER = /^\d+$/
const address = (v: string): boolean => isIP(v) !== 0

/** Service links: `<SERVICE>_SERVICE_HOST`, `_SERVICE_PORT[_<NAME>]`, `_PORT`, `_PORT_<n>_<PROTO>[_PROTO|_PORT|_ADDR]`. */
const LINKS: readonly [RegExp, (value: string) => boolean][] = [
  [/_SERVICE_HOST$/, address],
  [/_SERVICE_PORT(?:_[A-Z0-9_]+)?$/, (v) => NUMBER.test(v)],
  [/_PORT(?:_\d+_(?:TCP|UDP|SCTP))?$/, (v) => ENDPOINT.test(v)],
  [/_PORT_\d+_(?:TCP|UDP|SCTP)_PROTO$/, (v) => PROTO.test(v)],
  [/_PORT_\d+_(?:TCP|UDP|SCTP)_PORT$/, (v) => NUMBER.test(v)],
  [/_PORT_\d+_(?:TCP|UDP|SCTP)_ADDR$/, address],
]

function serviceLink(name: string, value: string): boolean {
  return LINKS.some(([shape, valid]) => shape.test(name) && valid(value))
}

/** Edit distance with adjacent transpositions (optimal string alignment). */
export function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)))
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1)
      d[i]![j] = v
    }
  }
  return d[a.length]![b.length]!
}

/** The known name closest to `name`, when it is close enough to be what was meant (two edits, or a third of the letters in longer names). */
export function closest(name: string, known: Iterable<string>): string | undefined {
  const bare = (n: string): string => n.slice('FAIRVISOR_'.length)
  let best: string | undefined
  let bestDistance = Math.max(2, Math.ceil(bare(name).length / 3)) + 1
  for (const k of known) {
    const dist = editDistance(bare(name), bare(k))
    if (dist < bestDistance) [best, bestDistance] = [k, dist]
  }
  return best
}

/** Throws naming the first FAIRVISOR_* variable of `env` that is neither in `known` nor accepted above. */
export function refuseUnknown(env: Env, known: ReadonlySet<string>): void {
  const settings = [...known].filter((n) => n.startsWith('FAIRVISOR_'))
  const unknown = Object.keys(env)
    .filter((n) => n.startsWith('FAIRVISOR_') && !known.has(n) && !NOT_SETTINGS.has(n) && !serviceLink(n, env[n] ?? ''))
    .sort()
  if (unknown.length === 0) return
  const hint = (name: string): string | undefined => {
    const meant = closest(name, settings)
    return meant && `did you mean ${meant}?`
  }
  const [first, ...more] = unknown
  const others = more.map((n) => (hint(n) ? `${n} (${hint(n)})` : n))
  const also = others.length === 0 ? '' : `; nor are ${others.join(', ')}`
  throw new SettingError(first!, `is not a setting; ${hint(first!) ?? 'fairvisor --help lists the settings'}${also}`)
}

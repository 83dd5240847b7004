/**
 * `fairvisor status [--admin-url URL] [--token T] [--top N]`: a running gateway seen from a terminal
 * through its admin listener (docs/admin.md): readiness (/readyz), then with the admin token
 * (--token, else FAIRVISOR_ADMIN_TOKEN) the bundle in force, the decision and reject rates between
 * two reads of the stats a second apart, and the keys rejected most.
 *
 * Exit 0: ready, and the admin API answered (or no token was given: readiness only). 1: not ready.
 * 2: bad command line. 3: the admin listener is unreachable, or the admin API refused the token or
 * is off.
 */
import { SettingError } from '../errors.js'
import { secret } from '../settings-env.js'
import { MIN_ADMIN_TOKEN_LENGTH } from '../settings-admin.js'
import { parseArgs, UsageError } from './args.js'
import { type BundleAnswer, bundleLines, rateLines, readinessLine, type StatsAnswer, type TopAnswer, topLines } from './status-report.js'

export const USAGE = 'usage: fairvisor status [--admin-url <url>] [--token <token>] [--top <n>]'

/** Each request's deadline: a gateway that does not answer within it is as good as unreachable. */
const TIMEOUT_MS = 5000

class Unreachable extends Error {}

interface Options {
  url: string
  token: string | undefined
  top: number
}

function options(args: string[], env: NodeJS.ProcessEnv): Options {
  const a = parseArgs(args, ['admin-url', 'token', 'top'])
  if (a.positional.length > 0) throw new UsageError(`unexpected argument ${a.positional[0]!}`)
  const port = env.FAIRVISOR_ADMIN_PORT
  const raw = a.options.get('admin-url') ?? (port ? `http://127.0.0.1:${port}` : undefined)
  if (raw === undefined) throw new UsageError('give --admin-url (or set FAIRVISOR_ADMIN_PORT for http://127.0.0.1:<port>)')
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new UsageError(`--admin-url "${raw}" is not a URL`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--admin-url "${raw}" must be http or https`)
  const top = Number(a.options.get('top') ?? '10')
  if (!Number.isInteger(top) || top < 1 || top > 1000) throw new UsageError('--top must be a whole number from 1 to 1000')
  const token = a.options.get('token') ?? secret(env, 'FAIRVISOR_ADMIN_TOKEN', MIN_ADMIN_TOKEN_LENGTH)
  return { url: url.origin, token, top }
}

async function get(url: string, token?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  let res: Response
  try {
    res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(TIMEOUT_MS) })
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause
    throw new Unreachable(`${url}: ${cause?.code ?? cause?.message ?? (err as Error).message}`)
  }
  const text = await res.text()
  try {
    return { status: res.status, body: JSON.parse(text) as Record<string, unknown> }
  } catch {
    throw new Unreachable(`${url}: answered ${res.status} with something that is not JSON (is this the admin listener?)`)
  }
}

/** An admin API answer, or Unreachable with the API's own error message. */
async function api<T>(o: Options, path: string): Promise<T> {
  const r = await get(`${o.url}/v1/admin/${path}`, o.token)
  if (r.status === 200) return r.body as T
  const e = r.body.error as { code?: string; message?: string } | undefined
  throw new Unreachable(`${o.url}/v1/admin/${path}: ${r.status} ${e?.code ?? ''} ${e?.message ?? ''}`.trimEnd())
}

export async function run(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let o: Options
  try {
    o = options(args, env)
  } catch (err) {
    if (!(err instanceof UsageError) && !(err instanceof SettingError)) throw err
    process.stderr.write(`fairvisor status: ${err.message}\n${USAGE}\n`)
    return 2
  }
  const out = (lines: string[]): void => void process.stdout.write(`${lines.join('\n')}\n`)
  try {
    const r = await get(`${o.url}/readyz`)
    const ready = r.status === 200
    out([readinessLine(o.url, { ready, body: r.body })])
    if (o.token === undefined) {
      out(['(no admin token: give --token or FAIRVISOR_ADMIN_TOKEN for the bundle, rates and top keys)'])
      return ready ? 0 : 1
    }
    out(bundleLines(await api<BundleAnswer>(o, 'bundle')))
    const first = await api<StatsAnswer>(o, 'stats')
    await new Promise((resolve) => setTimeout(resolve, 1000))
    out(rateLines(first, await api<StatsAnswer>(o, 'stats')))
    out(topLines(await api<TopAnswer>(o, `top?n=${o.top}`)))
    return ready ? 0 : 1
  } catch (err) {
    if (!(err instanceof Unreachable)) throw err
    process.stderr.write(`fairvisor status: admin API unreachable: ${err.message}\n`)
    return 3
  }
}

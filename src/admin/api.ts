/**
 * The admin API, `/v1/admin/*` on the admin listener (docs/admin.md), in both modes: the bundle,
 * the decision counts, the keys rejected most, and one key's counter read or reset. Every request
 * shows the bearer token first (auth.ts): without it, or with a wrong one, the answer is 401 and
 * says nothing else, whatever the path. Errors are JSON with a code of the catalogue
 * (errors.ts ADMIN_ERRORS); every answer is `cache-control: no-store`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { CompiledBundle } from '../bundle/compile.js'
import { AdminRequestError, type AdminErrorCode, ADMIN_ERRORS } from '../errors.js'
import { sendJson } from '../http/respond.js'
import { ADMIN_PREFIX } from '../http/admin.js'
import { pathOf, type Handler } from '../http/server.js'
import type { ProcessView } from '../observe/admin-view.js'
import type { Logger } from '../observe/logger.js'
import type { Settings } from '../settings.js'
import type { FailPolicy, Store } from '../store/store.js'
import { tokenCheck } from './auth.js'
import { bundleAnswer } from './bundle-view.js'
import { counterAnswer, counterQuery, readCounter, resetCounter, resolveCounter } from './counters.js'
import { topAnswer, topCount } from './top.js'
import { shownKey } from '../engine/log-key.js'

export interface AdminApiOptions {
  /** FAIRVISOR_ADMIN_TOKEN. */
  token: string
  bundle(): CompiledBundle | null
  store: Store
  failPolicy: FailPolicy
  settings: Pick<Settings, 'mode' | 'workers' | 'configFile' | 'adminTopWindowS'>
  /** The process's rejected keys, decision counts and reloads (runtime/runtime.ts processView). */
  view(): Promise<ProcessView>
  log: Logger
  /** Epoch ms. */
  clock(): number
}

function sendError(res: ServerResponse, code: AdminErrorCode, message: string, headers?: string[]): void {
  sendJson(res, ADMIN_ERRORS[code], { error: { code, message } }, headers)
}

type Route = (req: IncomingMessage, params: URLSearchParams) => Promise<object>

/** The whole of `/v1/admin/*`: one handler, which the admin listener routes every such path to. */
export function adminApi(o: AdminApiOptions): Handler {
  const authorised = tokenCheck(o.token)
  const get: Record<string, Route> = {
    bundle: async () => bundleAnswer(o.bundle(), (await o.view()).reloads, o.settings, o.store, o.failPolicy),
    stats: async () => ({ at: new Date(o.clock()).toISOString(), ...(await o.view()).stats }),
    top: async (_req, params) => {
      const n = topCount(params)
      return topAnswer(await o.view(), n, o.settings.adminTopWindowS)
    },
    counters: async (_req, params) => {
      const q = counterQuery(params)
      const now = o.clock()
      const target = await resolveCounter(o.bundle(), q, now, o.view)
      return counterAnswer(q, target, await readCounter(o.store, target, now))
    },
  }
  const del: Record<string, Route> = {
    counters: async (req, params) => {
      const q = counterQuery(params)
      const target = await resolveCounter(o.bundle(), q, o.clock(), o.view)
      await resetCounter(o.store, target)
      // Who asked, and what (the key as logs show it: never a credential in clear).
      o.log.info(
        {
          event: 'admin_counter_reset',
          policy: q.policy,
          rule: q.rule,
          key: shownKey(target.rule, target.composite),
          counters: target.keys.length,
          remote: req.socket.remoteAddress,
        },
        'counter reset through the admin API',
      )
      return { reset: true, policy: q.policy, rule: q.rule, key: q.key }
    },
  }
  return (req, res) => {
    if (!authorised(req.headers.authorization)) return sendError(res, 'admin_unauthorized', 'unauthorized', ['www-authenticate', 'Bearer'])
    const url = req.url ?? '/'
    const name = pathOf(url).slice(ADMIN_PREFIX.length)
    const method = req.method ?? 'GET'
    const table = method === 'GET' ? get : method === 'DELETE' ? del : undefined
    if (!Object.hasOwn(get, name) && !Object.hasOwn(del, name)) return sendError(res, 'admin_not_found', `no admin route ${pathOf(url)}`)
    if (table === undefined || !Object.hasOwn(table, name)) {
      const allow = [Object.hasOwn(get, name) ? 'GET' : '', Object.hasOwn(del, name) ? 'DELETE' : ''].filter(Boolean).join(', ')
      return sendError(res, 'admin_method_not_allowed', `${method} is not allowed here; use ${allow}`, ['allow', allow])
    }
    const route = table[name]!
    const q = url.indexOf('?')
    route(req, new URLSearchParams(q === -1 ? '' : url.slice(q + 1))).then(
      (body) => sendJson(res, 200, body),
      (err: Error) => {
        if (err instanceof AdminRequestError) return sendError(res, err.adminCode, err.message)
        o.log.error({ err: { message: err.message, stack: err.stack } }, 'admin API request failed')
        sendError(res, 'admin_failed', err.message)
      },
    )
  }
}

/** `/v1/admin/*` without FAIRVISOR_ADMIN_TOKEN: off, and says so. */
export const adminDisabled: Handler = (_req, res) =>
  sendError(res, 'admin_disabled', 'the admin API is off: set FAIRVISOR_ADMIN_TOKEN (with FAIRVISOR_ADMIN_PORT) to turn it on')

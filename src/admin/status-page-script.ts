/**
 * The status page's script (the browser runs it; served inline by
 * admin/status-page.ts under a hash-only Content-Security-Policy). It asks for
 * the admin token (kept in sessionStorage: this tab only), then reads the admin
 * API (docs/admin.md) on the origin that served it and nothing else: stats
 * each second (rates are the differences of the cumulative counters), the
 * bundle, top keys and readiness every few seconds. A 401 forgets the token and
 * asks again. Data is written with textContent only, never parsed as HTML: a
 * limited key is whatever a client sent. The DOM helpers live in
 * admin/status-page-render.ts's RENDER, joined before this text.
 * Plain browser JavaScript in a string: no template literals or backslashes
 * inside, so the text is the same once embedded.
 */

export const SCRIPT = `
const TOKEN = 'fairvisor.adminToken'
const SLOW_EVERY = 5 // bundle, top keys and readiness: every fifth poll
const DECISIONS = [['allow', 'Allowed'], ['reject', 'Rejected'], ['shadow_reject', 'Rejected in shadow mode']]

/** Why the token prompt is shown again: the message under it. */
class Unauthorized extends Error {}
const REFUSED = 'The gateway refused this token. Enter the admin token again.'
const DISABLED = 'The admin API is off: the gateway runs without FAIRVISOR_ADMIN_TOKEN.'

/** One admin API call with the token; a 401 (or no token) throws Unauthorized, an API that is off too. */
async function api(path, method) {
  const token = sessionStorage.getItem(TOKEN)
  if (!token) throw new Unauthorized('')
  const res = await fetch(path, {
    method: method || 'GET',
    headers: { authorization: 'Bearer ' + token },
    cache: 'no-store',
    credentials: 'omit',
    redirect: 'error',
  })
  if (res.status === 401) throw new Unauthorized(REFUSED)
  const body = await res.json().catch(() => null)
  if (res.status === 404 && body && body.error && body.error.code === 'admin_disabled') throw new Unauthorized(DISABLED)
  if (!res.ok) throw new Error((body && body.error && body.error.message) || 'HTTP ' + res.status)
  return body
}

let generation = 0 // bumped on every start and stop: a poll of an older generation ends quietly
let timer
let tick = 0
let last // the previous stats sample: { at, decisions, reasons }
const rates = new Map() // 'decision:allow' or 'reason:tb_exceeded' -> the last HISTORY rates

function showLogin(message) {
  generation++
  clearTimeout(timer)
  sessionStorage.removeItem(TOKEN)
  $('status').hidden = true
  $('logout').hidden = true
  $('updated').textContent = ''
  $('login').hidden = false
  $('login-error').textContent = message || ''
  $('token').focus()
}

function start() {
  const gen = ++generation
  clearTimeout(timer)
  tick = 0
  last = undefined
  rates.clear()
  $('login').hidden = true
  $('login-error').textContent = ''
  $('status').hidden = false
  $('logout').hidden = false
  poll(gen)
}

async function poll(gen) {
  try {
    const calls = [api('/v1/admin/stats').then((s) => gen === generation && showStats(s))]
    if (tick % SLOW_EVERY === 0) calls.push(refreshSlow(gen))
    await Promise.all(calls)
    if (gen !== generation) return
    $('updated').textContent = 'Updated ' + new Date().toLocaleTimeString()
  } catch (err) {
    if (gen !== generation) return
    if (err instanceof Unauthorized) return showLogin(err.message)
    notice('Could not read the admin API: ' + err.message)
  }
  if (gen !== generation) return
  tick++
  timer = setTimeout(() => poll(gen), 1000)
}

/** The parts that change slowly: bundle (with store, workers, reloads), top keys, readiness. */
async function refreshSlow(gen) {
  const [bundle, top, ready] = await Promise.all([api('/v1/admin/bundle'), api('/v1/admin/top?n=20'), readiness()])
  if (gen !== generation) return
  showGateway(bundle, ready)
  showPolicies(bundle.policies || [])
  showReloads(bundle.reloads || [])
  showTop(top)
}

/** /readyz needs no token; what it says is shown beside the store's health. */
async function readiness() {
  try {
    const res = await fetch('/readyz', { cache: 'no-store', credentials: 'omit', redirect: 'error' })
    const body = await res.json()
    return body.status === 'ready' ? 'ready' : 'not ready: ' + (body.reason || res.status)
  } catch (err) {
    return 'unknown: ' + err.message
  }
}

function remember(name, rate) {
  let h = rates.get(name)
  if (!h) rates.set(name, (h = []))
  h.push(rate)
  if (h.length > HISTORY) h.shift()
  return h
}

function showStats(s) {
  const at = Date.parse(s.at)
  const decisions = s.decisions || {}
  const reasons = s.rejects_by_reason || {}
  const prev = last && at > last.at ? last : undefined
  const rateOf = (now, before) => (prev ? Math.max(0, (now || 0) - (before || 0)) / ((at - prev.at) / 1000) : undefined)
  const rows = (names, current, previous, kind) =>
    names.map(([name, label]) => {
      const rate = rateOf(current[name], previous && previous[name])
      const h = rate === undefined ? rates.get(kind + ':' + name) || [] : remember(kind + ':' + name, rate)
      return [label, cell(rate === undefined ? 'measuring…' : formatRate(rate), 'num'), cell(formatCount(current[name] || 0), 'num'), sparkline(h, label)]
    })
  fill($('decisions'), rows(DECISIONS, decisions, prev && prev.decisions, 'decision'), 'No decisions yet.')
  const names = Object.keys(reasons).sort().map((r) => [r, r])
  fill($('reasons'), rows(names, reasons, prev && prev.reasons, 'reason'), 'No request rejected since start.')
  last = { at, decisions, reasons }
}

function showGateway(b, ready) {
  const store = b.store || {}
  const health = document.createElement('span')
  health.className = store.healthy ? 'ok' : 'bad'
  health.textContent = (store.kind || '?') + ', ' + (store.healthy ? 'healthy' : 'unhealthy')
  describe($('gateway'), [
    ['Bundle version', b.version === null || b.version === undefined ? 'none loaded' : String(b.version)],
    ['Bundle hash', code(b.hash || '')], // as /readyz and fairvisor_config_info show it: opaque text to compare
    ['Source', code(b.source || '')],
    ['Loaded at', when(b.loaded_at)],
    ['Mode', b.mode],
    ['Workers', String(b.workers)],
    ['Store', health],
    ['Readiness', ready],
  ])
}

function showPolicies(policies) {
  const box = $('policies')
  box.replaceChildren()
  if (policies.length === 0) box.textContent = 'No policy loaded.'
  for (const p of policies) {
    const div = document.createElement('div')
    div.className = 'policy'
    const h = document.createElement('h3')
    h.textContent = 'Policy ' + p.id + ' (' + p.mode + ')'
    const t = table(['Rule', 'Algorithm', 'Limits', 'Limit keys'], 'Rules of policy ' + p.id)
    fill(t, (p.rules || []).map((r) => [r.name, code(r.algorithm), limits(r.algorithm_config), code((r.limit_keys || []).join(', '))]), 'No rules.')
    div.append(h, t)
    box.append(div)
  }
}

function showReloads(reloads) {
  const newest = reloads.slice().sort((a, b) => Date.parse(b.at) - Date.parse(a.at))
  fill($('reloads'), newest.map((r) => [when(r.at), r.result, r.version === null || r.version === undefined ? '' : String(r.version)]), 'No reload yet.')
}

function showTop(top) {
  // The sketch keeps two rotating half windows: what it counts is from the last half window to the whole of it.
  const s = top.window_seconds || 0
  const span = s >= 120 ? Math.round(s / 60) + ' minutes' : s + ' seconds'
  $('top-caption').textContent = 'Keys rejected most in the last ' + span + ' at most; credentials are shown as their logged hash.'
  const rows = (top.entries || []).map((e) => [e.policy, e.rule, e.reason, code(e.key), cell(formatCount(e.count), 'num'),
    cell(formatCount(e.error || 0), 'num'), resetButton(e)])
  fill($('top'), rows, 'No key rejected in this window.')
}

function resetButton(e) {
  const b = document.createElement('button')
  b.type = 'button'
  b.append('Reset', hidden(' counter of key ' + e.key + ' (' + e.policy + '/' + e.rule + ')'))
  b.addEventListener('click', async () => {
    b.disabled = true
    const gen = generation
    try {
      await api('/v1/admin/counters?' + new URLSearchParams({ policy: e.policy, rule: e.rule, key: e.key }), 'DELETE')
      notice('Counter reset: key ' + e.key + ' of ' + e.policy + '/' + e.rule + '.')
      await refreshSlow(gen)
    } catch (err) {
      if (gen !== generation) return
      if (err instanceof Unauthorized) return showLogin(err.message)
      notice('Could not reset key ' + e.key + ': ' + err.message)
      b.disabled = false
    }
  })
  return b
}

$('login-form').addEventListener('submit', (ev) => {
  ev.preventDefault()
  const token = $('token').value.trim()
  $('token').value = ''
  if (!token) return
  sessionStorage.setItem(TOKEN, token)
  start()
})
$('logout').addEventListener('click', () => showLogin())
if (sessionStorage.getItem(TOKEN)) start()
else showLogin()
`

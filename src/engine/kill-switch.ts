/**
 * Kill switches (docs/behaviour.md §4 step 2) and the Retry-After jitter identity of a request.
 * A route is compared as a default selector's pathExact (any case, with or without a trailing
 * slash, every reading of the path): a switch spelled around is no switch.
 */
import type { CompiledBundle } from '../bundle/compile.js'
import { foldPath } from '../bundle/route-index.js'
import type { RequestView } from '../request/view.js'
import { jitterIdentity, retryAfterWithJitter } from './jitter.js'

/**
 * The jitter identity: JWT subject (sub, user_id or uid), client address and path with its query
 * (docs/behaviour.md §7). Fairvisor Edge's decision service takes X-Original-URI whole, query
 * included; both our modes do the same, so one request gets one Retry-After however it arrives.
 */
export function identityOf(view: RequestView): string {
  const subject = view.claim('sub') ?? view.claim('user_id') ?? view.claim('uid') ?? ''
  const query = view.rawQuery
  return jitterIdentity(subject, view.ip, query === '' ? view.path : `${view.path}?${query}`)
}

/** A route meets one of the other readings of the request path (request/normalise.ts). */
function alsoOn(routeFolded: string, view: RequestView): boolean {
  return view.alsoPaths?.some((p) => foldPath(p) === routeFolded) === true
}

/** Retry-After of the first kill switch that fires for this request, else undefined. */
export function killSwitchRetryAfter(bundle: CompiledBundle, view: RequestView, nowMs: number): number | undefined {
  if (bundle.killSwitches.length === 0) return undefined
  if (bundle.killSwitchOverrideUntil !== undefined && nowMs < bundle.killSwitchOverrideUntil) return undefined
  let folded: string | undefined
  for (const ks of bundle.killSwitches) {
    if (ks.expiresAtMs !== undefined && nowMs >= ks.expiresAtMs) continue
    if (ks.routeFolded !== undefined && ks.routeFolded !== (folded ??= foldPath(view.path)) && !alsoOn(ks.routeFolded, view)) continue
    if (ks.extract(view) !== ks.value) continue
    // No policy or rule owns a kill switch: both jitter seed parts are empty (README).
    return retryAfterWithJitter(3600, '', '', 'kill_switch', identityOf(view))
  }
  return undefined
}

/** Kill switches (docs/behaviour.md §4 step 2) and the Retry-After jitter identity of a request. */
import type { CompiledBundle } from '../bundle/compile.js'
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

/** Retry-After of the first kill switch that fires for this request, else undefined. */
export function killSwitchRetryAfter(bundle: CompiledBundle, view: RequestView, nowMs: number): number | undefined {
  if (bundle.killSwitches.length === 0) return undefined
  if (bundle.killSwitchOverrideUntil !== undefined && nowMs < bundle.killSwitchOverrideUntil) return undefined
  for (const ks of bundle.killSwitches) {
    if (ks.expiresAtMs !== undefined && nowMs >= ks.expiresAtMs) continue
    if (ks.route !== undefined && ks.route !== view.path) continue
    if (ks.extract(view) !== ks.value) continue
    // No policy or rule owns a kill switch: both jitter seed parts are empty (README).
    return retryAfterWithJitter(3600, '', '', 'kill_switch', identityOf(view))
  }
  return undefined
}

/**
 * Bundles limiting Rate Limit Service calls: each descriptor of a
 * ShouldRateLimit call is decided by the bundle as a request `POST /<domain>`
 * whose `descriptor:<key>` values are the descriptor's entries, so a
 * Fairvisor policy (any algorithm, shadow, kill switches) can limit what
 * Envoy's rate limit filter asks about. Each decision is folded into its
 * descriptor's status by decision/rls-answer.ts mergeDecision.
 */
import type { Context } from '@opentelemetry/api'
import type { Decision } from '../engine/decision.js'
import type { RequestInput } from '../request/view.js'
import type { Decide } from '../decision/decide.js'
import { readPath } from '../request/normalise.js'
import type { Entry } from './rls-match.js'

/** `trace`: the call's span context when it is traced (each descriptor's decision goes under it). */
export function decideDescriptors(
  decide: Decide,
  domain: string,
  descriptors: ReadonlyArray<{ entries: Entry[] }>,
  trace: Context | undefined,
  then: (ds: Decision[]) => void,
): void {
  const out: Decision[] = new Array(descriptors.length)
  let left = descriptors.length
  // Read as a request path is (request/normalise.ts), so selectors see it as they see every path.
  const path = readPath(`/${domain}`, 'keep').path
  descriptors.forEach((d, i) => {
    const input: RequestInput = {
      method: 'POST',
      path,
      rawQuery: '',
      host: '',
      rawHeaders: [],
      peer: '',
      descriptorEntries: new Map(d.entries.map((e) => [e.key, e.value])),
    }
    if (trace !== undefined) input.trace = trace
    decide(input, false, (decision) => {
      const done = (): void => {
        out[i] = decision
        if (--left === 0) then(out)
      }
      // A descriptor held for its debt (max_delay_ms) holds the answer, as ext_authz does.
      if (decision.hold === undefined) done()
      else decision.hold.then(done)
    })
  })
}

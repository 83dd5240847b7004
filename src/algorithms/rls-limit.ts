/**
 * The limit of a Rate Limit Service descriptor (envoyproxy/ratelimit's YAML,
 * grpc/rls-config.ts), as the engine sees it: a window counter aligned on its
 * unit since the epoch, `requests_per_unit` hits per window, each
 * descriptor's hits_addend its cost. No bundle names it: the RLS
 * configuration is compiled onto it (grpc/rls-compile.ts). Its reason and
 * RateLimit-* values are what the decision reports (metrics, logs); the RLS
 * answer is made from the outcome itself (decision/rls-answer.ts).
 */
import { EPSILON, type Algorithm, type HeaderValues } from './algorithm.js'
import type { CounterLimit } from './kinds/window-counter/kind.js'

declare module './algorithm.js' {
  interface RejectReasons {
    rls_over_limit: true
  }
}

export const RLS_LIMIT: Algorithm<CounterLimit> = {
  name: 'rls',
  keyPrefix: 'rls:',
  rejectReason: 'rls_over_limit',
  headers(l, count, secondsToEnd, rejected): HeaderValues {
    return {
      limit: l.limit,
      remaining: rejected ? 0 : Math.max(0, Math.floor(l.limit - count + EPSILON)),
      resetS: secondsToEnd,
      windowS: l.windowS,
    }
  },
  describe: (l, count) => `${count}/${l.limit} hits this window`,
}

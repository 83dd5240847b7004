/**
 * concurrency: requests in flight at once per key, on the concurrency kind
 * (kinds/concurrency/: its maths in TypeScript, Lua and PL/pgSQL). A request
 * takes a slot in its one store call and, in reverse proxy mode, gives it
 * back when its exchange ends (http/slot-holds.ts: response finished, client
 * gone, upstream failed, stream cut), renewing it every third of the lease
 * while it lasts; a slot whose holder died frees itself within
 * `lease_seconds`. The decision service and gRPC do not see a request end:
 * there a rule must say `"release": "lease"`, and each slot is held for its
 * lease (between 2/3 of it and all of it), an approximation.
 */
import type { BundleUse, HeaderValues, RuleAlgorithm } from './algorithm.js'
import { concurrencyLimit, type ConcurrencyLimit } from './kinds/concurrency/kind.js'

declare module './algorithm.js' {
  interface RejectReasons {
    concurrency_exceeded: true
  }
}

export const DEFAULT_LEASE_S = 300

/** A concurrency rule's limit and how its slots are given back. */
export interface ConcurrencyConfig extends ConcurrencyLimit {
  /** 'exchange': when the request's exchange ends (reverse proxy); 'lease': when the lease runs out. */
  release: 'exchange' | 'lease'
}

/** Where no request end is seen among `use`, and what to do instead, for the message; undefined: a reverse proxy only. */
function blind(use: BundleUse): string | undefined {
  if (use.mode === 'decision_service') return 'the decision service (/v1/decision) does not see a request end'
  if (use.grpc) return 'gRPC (ext_authz, the Rate Limit Service; FAIRVISOR_GRPC_PORT) does not see a request end'
  return undefined
}

export const CONCURRENCY: RuleAlgorithm<ConcurrencyConfig> = {
  name: 'concurrency',
  keyPrefix: 'cc:',
  rejectReason: 'concurrency_exceeded',
  configSchema: {
    type: 'object',
    required: ['max_concurrent'],
    properties: {
      max_concurrent: { type: 'integer', minimum: 1, maximum: 1_000_000, description: 'Requests of one key in flight at once.' },
      lease_seconds: {
        type: 'number',
        minimum: 1,
        maximum: 86_400,
        description: `Longest a slot stays taken when its holder dies (or, with release "lease", at all); default ${DEFAULT_LEASE_S}.`,
      },
      fixed_cost: { $ref: '#/$defs/positiveInteger', description: 'Slots one request takes (default 1).' },
      release: {
        enum: ['exchange', 'lease'],
        description:
          'exchange (default): a slot is given back when the request ends (reverse proxy only); lease: it is held for lease_seconds (decision service, gRPC).',
      },
    },
  },
  check(c, out, use) {
    const where = blind(use)
    if ((c.release ?? 'exchange') === 'exchange' && where !== undefined)
      out.push({
        field: 'release',
        message: `${where}, so a slot would never be given back: set "release": "lease" to hold each slot for lease_seconds (an approximation), or serve this rule from a reverse proxy alone`,
      })
  },
  capacity: (l) => l.max,
  // The state's buckets are thirds of the lease: another lease is another counter.
  counterKeyPart: (l) => `l${l.leaseS}:`,
  normalise(c) {
    return {
      ...concurrencyLimit(Number(c.max_concurrent), Number(c.lease_seconds ?? DEFAULT_LEASE_S)),
      release: c.release === 'lease' ? 'lease' : 'exchange',
    }
  },
  headers(l, free, retryAfter, rejected): HeaderValues {
    // No window: `w` is 1 (in flight at once), and a slot may free any moment (Reset 1, a reject's Retry-After).
    return { limit: l.max, remaining: Math.floor(free), resetS: rejected ? retryAfter : 1, windowS: 1 }
  },
  describe: (l, free) => `${+(l.max - free).toFixed(6)}/${l.max} slots in flight`,
  holdRenewS: (l) => (l.release === 'exchange' ? l.leaseS / 3 : undefined),
}

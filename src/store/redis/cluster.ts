/**
 * Redis Cluster store. A script can only touch keys of one hash slot, and the
 * limits of one request usually live in several slots, so:
 *
 * 1. checks are grouped by slot (cluster-key-slot) and every slot gets ONE call of the
 *    token-bucket script, all slots in parallel. Within a slot the call is
 *    atomic and all-or-nothing per group, exactly like the standalone store;
 * 2. the per-slot outcomes are merged in the request's check order: per group
 *    the first reject wins, later checks of that group get no outcome;
 * 3. if a group rejected, the slots that committed that group (because
 *    nothing rejected on their side) get a refund call giving the tokens back.
 *
 * So no tokens stay spent for a rejected request, but between the take and
 * the refund (one round trip) other requests see the tokens as taken and may
 * be rejected early. Nothing can be over-granted: a refund never returns more
 * than was taken and never fills a bucket past its burst. Refunds are sent
 * without waiting for them; they go out on the same node connections before
 * any later call of this gateway.
 *
 * The deadline (FAIRVISOR_REDIS_TIMEOUT_MS) covers the whole request; a slot
 * reply that arrives after it (or next to another slot's failure) is refunded.
 */
import calculateSlot from 'cluster-key-slot'
import { Cluster, type RedisOptions } from 'ioredis'
import { StoreTimeoutError } from '../../errors.js'
import { asksReads, listArgs, readTake, takeFigures, takeReplyFits, takeStatus, visitAdjustArgs, visitTakeArgs } from './codec.js'
import { closeClient, redisState, waitForReady, watchConnection, type RedisStoreOptions } from './common.js'
import { callTimerMs, reconnectDelay, storeError } from '../remote.js'
import { redisScripts } from './script.js'
import { sniFor, type RedisTarget } from './url.js'
import { storedKey } from '../stored-key.js'
import type { Adjustment, ApplyDone, Check, Outcomes, Store, StoreState } from '../store.js'

/** The take script's reply: TAKE_REPLY_BYTES per check (script.ts). */
type TakeReply = Buffer

/** Commands added to the ioredis cluster client by defineCommand (numkeys passed first). */
interface ScriptCommands {
  fvTakeBuffer(...args: string[]): Promise<Buffer>
  fvAdjust(...args: string[]): Promise<string>
}

/** Connection options of every cluster node. */
function nodeOptions(t: RedisTarget): RedisOptions {
  return {
    username: t.username,
    password: t.password,
    // The offline queue would park requests behind reconnect attempts.
    enableOfflineQueue: false,
    // A command caught by a dropped connection fails now instead of being resent later.
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: reconnectDelay,
    ...(t.tls ? { tls: sniFor(t.host) } : {}),
  }
}

export class RedisClusterStore implements Store {
  readonly kind = 'redis-cluster'
  readonly client: Cluster & ScriptCommands
  private readonly timeoutMs: number
  private lastCallFailed = false
  /** Refund calls sent (observability for tests and operators). */
  refunds = 0

  constructor(private readonly opts: RedisStoreOptions) {
    const t = opts.target
    this.timeoutMs = callTimerMs(opts.timeoutMs)
    const client = new Cluster(t.nodes, {
      enableOfflineQueue: false,
      scaleReads: 'master',
      clusterRetryStrategy: reconnectDelay,
      slotsRefreshTimeout: 1000,
      retryDelayOnClusterDown: 50,
      retryDelayOnTryAgain: 50,
      dnsLookup: (address, cb) => cb(null, address),
      redisOptions: {
        ...nodeOptions(t),
        // Our own deadline answers the request; the node timeout is longer so
        // a late reply still arrives and its tokens can be refunded.
        commandTimeout: Math.max(1000, opts.timeoutMs * 4),
      },
    })
    const scripts = redisScripts()
    client.defineCommand('fvTake', { lua: scripts.take })
    client.defineCommand('fvAdjust', { lua: scripts.adjust })
    this.client = client as Cluster & ScriptCommands
    watchConnection(client, 'redis-cluster', opts.log)
  }

  ready(timeoutMs: number): Promise<boolean> {
    return waitForReady(this.client, timeoutMs)
  }

  apply(checks: readonly Check[], _now: number, done: ApplyDone, reads?: Outcomes): void {
    const groups = bySlot(checks)
    // Read-backs only within one slot: over several, a group's reject is known after the slots committed theirs.
    const back = reads !== undefined && groups.length === 1 && asksReads(checks) ? reads : undefined
    const calls = groups.map((idx) =>
      this.client.fvTakeBuffer(...listArgs((visit) => visitTakeArgs(checks, idx, visit, back !== undefined))),
    )
    let settled = false
    const fail = (err: unknown): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      this.lastCallFailed = true
      // Whatever a slot committed for this failed request is given back when (if) its reply comes.
      for (const [g, c] of calls.entries()) {
        c.then(
          (reply) => this.refundCommitted(checks, groups[g]!, reply, [true, true]),
          () => undefined,
        )
      }
      done(storeError('redis', err))
    }
    const timer = setTimeout(() => fail(new StoreTimeoutError('redis cluster call timed out')), this.timeoutMs)
    Promise.all(calls).then((replies) => {
      if (settled) return
      let out: Outcomes
      try {
        out = this.merge(checks, groups, replies, back)
      } catch (err) {
        return fail(err) // a reply that is not the script's: the fail policy, not an unhandled rejection
      }
      settled = true
      clearTimeout(timer)
      this.lastCallFailed = false
      done(null, out)
    }, fail)
  }

  adjust(adjustments: readonly Adjustment[], _now: number, done: (err: Error | null) => void): void {
    const calls = bySlot(adjustments).map((idx) =>
      this.client.fvAdjust(
        ...listArgs((visit) =>
          visitAdjustArgs(
            idx.map((i) => adjustments[i]!),
            visit,
          ),
        ),
      ),
    )
    Promise.all(calls).then(
      () => done(null),
      (err) => done(storeError('redis', err)),
    )
  }

  /** One DEL per key (the keys of a reset may lie in different slots; the admin API). */
  reset(keys: readonly string[], done: (err: Error | null) => void): void {
    Promise.all(keys.map((k) => this.client.del(storedKey(k)))).then(
      () => done(null),
      (err: unknown) => done(storeError('redis', err)),
    )
  }

  private merge(checks: readonly Check[], groups: number[][], replies: TakeReply[], reads: Outcomes | undefined): Outcomes {
    const out: Outcomes = new Array(checks.length)
    for (let g = 0; g < groups.length; g++) readTake(replies[g]!, out, groups[g], reads)
    // Per group (0 enforce, 1 shadow) the first reject in request order ends it.
    const cut = [checks.length, checks.length]
    for (let i = 0; i < checks.length; i++) {
      const o = out[i]
      const grp = checks[i]!.shadow ? 1 : 0
      if (i > cut[grp]!) out[i] = undefined
      else if (o !== undefined && !o.allowed) cut[grp] = i
    }
    const rejected: [boolean, boolean] = [cut[0]! < checks.length, cut[1]! < checks.length]
    if (rejected[0] || rejected[1]) {
      for (let g = 0; g < groups.length; g++) this.refundCommitted(checks, groups[g]!, replies[g]!, rejected)
    }
    return out
  }

  /** Refund the checks of `idx` whose group committed in this slot's reply, for the groups flagged in `groupsToRefund`. */
  private refundCommitted(checks: readonly Check[], idx: readonly number[], reply: TakeReply, groupsToRefund: [boolean, boolean]): void {
    // Nothing can be known of what a reply that is not the script's committed.
    if (!takeReplyFits(reply, idx.length)) return
    // A slot committed a group only if none of that group's checks rejected there.
    const localReject = [false, false]
    for (let k = 0; k < idx.length; k++) if (takeStatus(reply, k) === 0) localReject[checks[idx[k]!]!.shadow ? 1 : 0] = true
    const refunds: Adjustment[] = []
    for (let k = 0; k < idx.length; k++) {
      const c = checks[idx[k]!]!
      const grp = c.shadow ? 1 : 0
      if (!groupsToRefund[grp] || localReject[grp] || takeStatus(reply, k) !== 1) continue
      // A kind may give back by its outcome (a sliding window's held charge, counted for the next window).
      refunds.push({ key: c.key, limit: c.limit.kind.giveBack?.(c.limit, takeFigures(reply, k), 0) ?? c.limit, amount: c.cost })
    }
    if (refunds.length === 0) return
    this.refunds++
    this.adjust(refunds, 0, (err) => {
      if (err)
        this.opts.log?.(
          'warn',
          { store: 'redis-cluster', err: err.message, keys: refunds.length },
          'refund of a rejected request failed; those tokens stay spent until the bucket refills',
        )
    })
  }

  state(): StoreState {
    return redisState(this.client.status, this.lastCallFailed)
  }

  close(): Promise<void> {
    return closeClient(this.client)
  }
}

/** Indexes of `items` (checks or adjustments) grouped by the hash slot of their key, in order within each slot. */
function bySlot(items: readonly { key: string }[]): number[][] {
  const slots = new Map<number, number[]>()
  for (let i = 0; i < items.length; i++) {
    const s = calculateSlot(storedKey(items[i]!.key)) // the slot of the key sent (codec.ts)
    const list = slots.get(s)
    if (list) list.push(i)
    else slots.set(s, [i])
  }
  return [...slots.values()]
}

/**
 * The metrics computed when /metrics is scraped, from what the gateway holds
 * then (the bundle, the clock, the in-process store's fill), not counted as
 * events: an override or kill switch shows as off the moment it expires.
 * Registered by createMetrics (metrics.ts) among the others, in its order.
 */
import { Counter, Gauge, type Registry } from 'prom-client'
import type { StoreFill } from '../store/store.js'

/**
 * What the scrape-time gauges read: the bundle snapshot and the clock. Kept
 * structural so observe/ needs nothing from bundle/.
 */
export interface LiveState {
  bundle(): {
    policies: readonly { shadow: boolean }[]
    killSwitches: readonly { expiresAtMs: number | undefined }[]
    globalShadowUntil: number | undefined
    killSwitchOverrideUntil: number | undefined
  } | null
  nowMs(): number
  /** The in-process store's fill, undefined for remote stores. */
  storeFill?(): StoreFill | undefined
  /** Checks of leased limits decided exactly for want of a lease table cell (this thread's), undefined without leasing. */
  leaseTableFull?(): number | undefined
  /** Failed clean-ups of expired rows (this thread's store: PostgreSQL), undefined for the other stores. */
  storeCleanupErrors?(): number | undefined
  /** Requests the process holds for their debt now (decision/hold-slots.ts). */
  delayedHeld?(): number
  /** Concurrency slots this thread's forwarded requests hold now (per policy), and its give-backs (http/slot-holds.ts). */
  slots?(): { inFlight: ReadonlyMap<string, number>; released: number; dropped: number }
}

/** The kill switch and shadow gauges; `live()` is undefined until the gateway binds its state (all read 0 then). */
export function bundleGauges(r: Registry[], live: () => LiveState | undefined) {
  const activeUntil = (until: number | undefined): number => {
    const l = live()
    return until !== undefined && l !== undefined && l.nowMs() < until ? 1 : 0
  }
  return {
    killSwitchActive: new Gauge({
      name: 'fairvisor_kill_switch_active',
      help: 'Kill switches in the loaded bundle that have not expired.',
      registers: r,
      collect() {
        const l = live()
        const b = l?.bundle()
        if (!l || !b) return void this.set(0)
        const now = l.nowMs()
        let n = 0
        for (const k of b.killSwitches) if (k.expiresAtMs === undefined || now < k.expiresAtMs) n++
        this.set(n)
      },
    }),
    shadowModeActive: new Gauge({
      name: 'fairvisor_shadow_mode_active',
      help: 'Policies running in shadow mode now (all of them while global_shadow is active).',
      registers: r,
      collect() {
        const b = live()?.bundle()
        if (!b) return void this.set(0)
        this.set(activeUntil(b.globalShadowUntil) ? b.policies.length : b.policies.filter((p) => p.shadow).length)
      },
    }),
    globalShadowActive: new Gauge({
      name: 'fairvisor_global_shadow_active',
      help: '1 while global_shadow is active.',
      registers: r,
      collect() {
        this.set(activeUntil(live()?.bundle()?.globalShadowUntil))
      },
    }),
    killSwitchOverrideActive: new Gauge({
      name: 'fairvisor_kill_switch_override_active',
      help: '1 while kill_switch_override is active.',
      registers: r,
      collect() {
        this.set(activeUntil(live()?.bundle()?.killSwitchOverrideUntil))
      },
    }),
  }
}

/** The in-process store's room, the lease table's and the PostgreSQL clean-up's failures, read from the store at scrape time. */
export function storeGauges(r: Registry[], live: () => LiveState | undefined) {
  return {
    // The in-process store never drops a live counter for a new key: the new key's request is refused instead, and counted here.
    storeFull: new Counter({
      name: 'fairvisor_store_full_total',
      help: 'Checks the in-process store refused (503 store_full) because it had no room for a new counter without dropping a live one (FAIRVISOR_SHARED_DICT_SIZE, FAIRVISOR_SHARED_TABLE_SIZE).',
      registers: r,
      collect() {
        const f = live()?.storeFill?.()
        if (!f) return
        this.reset()
        this.inc(f.full)
      },
    }),
    storeFill: new Gauge({
      name: 'fairvisor_store_fill_ratio',
      help: 'Bytes charged against FAIRVISOR_SHARED_DICT_SIZE by the in-process store, as a fraction of it.',
      registers: r,
      collect() {
        const f = live()?.storeFill?.()
        this.set(f ? f.bytesUsed / f.maxBytes : 0)
      },
    }),
    // More hot keys than the lease table holds: safe (decided exactly) but each costs a store call; visible, not silent.
    leaseTableFull: new Counter({
      name: 'fairvisor_lease_table_full_total',
      help: 'Checks of leased token buckets decided by an exact store call because the lease table had no cell for their key (FAIRVISOR_LEASE_TABLE_KEYS).',
      registers: r,
      collect() {
        const n = live()?.leaseTableFull?.()
        if (n === undefined) return
        this.reset()
        this.inc(n)
      },
    }),
    // Expired rows read as absent, so nothing is decided wrong, but a table that is never cleaned grows with every key seen.
    storeCleanupErrors: new Counter({
      name: 'fairvisor_store_cleanup_errors_total',
      help: 'Runs of the PostgreSQL store clean-up of expired rows that failed (each also logged, at most once a minute).',
      registers: r,
      collect() {
        const n = live()?.storeCleanupErrors?.()
        if (n === undefined) return
        this.reset()
        this.inc(n)
      },
    }),
  }
}

/** Concurrency slots held by the requests being forwarded, and their give-backs, read at scrape time. */
export function slotGauges(r: Registry[], live: () => LiveState | undefined) {
  return {
    concurrencyInFlight: new Gauge({
      name: 'fairvisor_concurrency_in_flight',
      help: 'Requests this gateway is forwarding that hold a concurrency slot, per policy.',
      labelNames: ['policy'],
      registers: r,
      collect() {
        const s = live()?.slots?.()
        if (s) for (const [policy, n] of s.inFlight) this.set({ policy }, n)
      },
    }),
    concurrencyReleases: new Counter({
      name: 'fairvisor_concurrency_releases_total',
      help: 'Concurrency slots given back at the end of their exchange, by result (released; dropped: the store failed, the slot frees at its lease end).',
      labelNames: ['result'],
      registers: r,
      collect() {
        const s = live()?.slots?.()
        this.reset()
        this.inc({ result: 'released' }, s?.released ?? 0)
        this.inc({ result: 'dropped' }, s?.dropped ?? 0)
      },
    }),
  }
}

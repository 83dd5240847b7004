/** Shapes of the bundle JSON as written by operators (after schema validation). */
import type { RawPrices } from '../llm/prices.js'

/** FAIRVISOR_MODE, as far as a bundle's validity depends on it (rules that act on the response need the reverse proxy). */
export type GatewayMode = 'reverse_proxy' | 'decision_service'

export interface RawRule {
  name?: string
  limit_keys?: string[]
  /** A name in ALGORITHMS (algorithms/index.ts); the schema refuses any other. */
  algorithm: string
  algorithm_config: Record<string, unknown>
  match?: Record<string, string | number | boolean>
  /** Reverse proxy mode only (ours): charge only responses with these statuses (`"401"`, `"4xx"`). */
  count_statuses?: string[]
  /** Reverse proxy mode only (ours): give the charge back on responses with these statuses. */
  refund_statuses?: string[]
}

export interface RawSelector {
  pathPrefix?: string
  pathExact?: string
  methods?: string[]
  hosts?: string[]
  /** Compare paths case-sensitively (default false: `/API/x` matches `/api/x`). */
  pathCaseSensitive?: boolean
  /** pathExact matches only with its trailing slash as written (default false: `/a/` matches `/a`). */
  pathTrailingSlashSensitive?: boolean
}

export interface RawPolicy {
  id: string
  spec: {
    selector: RawSelector
    mode?: 'enforce' | 'shadow'
    rules: RawRule[]
    fallback_limit?: RawRule
    loop_detection?: { enabled?: boolean; window_seconds?: number; threshold_identical_requests?: number; action?: string }
    circuit_breaker?: { enabled?: boolean; spend_rate_threshold_per_minute?: number; auto_reset_after_minutes?: number }
  }
}

export interface RawOverride {
  enabled: boolean
  reason?: string
  expires_at?: string
}

export interface RawKillSwitch {
  scope_key: string
  scope_value: string
  route?: string
  reason?: string
  expires_at?: string
}

export interface RawBundle {
  bundle_version: number
  issued_at?: string
  expires_at?: string
  policies: RawPolicy[]
  kill_switches?: RawKillSwitch[]
  global_shadow?: RawOverride
  kill_switch_override?: RawOverride
  defaults?: Record<string, unknown>
  /** Ours: model prices for cost_based budgets counted in money (llm/prices.ts). */
  llm_prices?: RawPrices
}

/** One problem of a bundle, with the JSON pointer it is at. */
export interface BundleIssue {
  pointer: string
  message: string
  /** Index in `policies` when the issue belongs to one policy. */
  policyIndex?: number
  policyId?: string
  ruleName?: string
  /** A warning, not an error: the bundle loads (e.g. a selector path that is not normalised, a limit that can never be reached). */
  warning?: boolean
}

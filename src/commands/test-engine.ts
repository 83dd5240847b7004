/**
 * The offline gateway of `fairvisor test`: the settings it shares with the
 * gateway (paths, mode, holds, network data, JWT), the bundle, an in-process
 * store and the engine, and one request through them on the caller's clock —
 * the sample file's (test.ts) or an access log's (test-replay.ts). One
 * set-up for both, so a replay decides exactly as a sample run does.
 */
import type { Decision, EngineObserver, PlannedLimit, ShadowReject } from '../engine/decision.js'
import { Engine } from '../engine/evaluate.js'
import { loadBundleFile } from '../bundle/load.js'
import type { CompiledBundle } from '../bundle/compile.js'
import { bearerToken, createJwtVerifier, type JwtVerifier } from '../request/jwt-verify.js'
import { NetworkData } from '../request/network-data.js'
import { rawHeader } from '../request/raw-headers.js'
import { RequestView } from '../request/view.js'
import { SettingError } from '../errors.js'
import type { PathSettings } from '../request/target.js'
import { jwtSettings, maxDelayedSetting, modeSetting, networkFiles, pathSettings } from '../settings.js'
import { MemoryStore } from '../store/memory/store.js'
import type { Outcomes } from '../store/store.js'
import { type LlmReport, llmReport } from './test-llm.js'
import { RecordingStore } from './test-report.js'
import { SimulatedHolds, type StatusSettlement, settleStatus } from './test-response.js'
import type { SampleRequest } from './test-samples.js'
import { SimulatedSlots } from './test-slots.js'

export const NOT_VERIFIED = 'claims not verified (no FAIRVISOR_JWT_HMAC_SECRET, FAIRVISOR_JWKS_FILE or FAIRVISOR_JWKS_URL)'

/** What one request went through and came out as. */
export interface OfflineResult {
  /** The decision as the client gets it (a hold refused for want of room: the reject). */
  decision: Decision
  /** Refused for want of a hold (FAIRVISOR_MAX_DELAYED): its enforce charges were given back. */
  refused: boolean
  planned: PlannedLimit[]
  /** Each planned limit's store outcome, in check order (empty when nothing was checked). */
  outcomes: Outcomes
  details: (string | undefined)[]
  skipped: { policy: string; rule: string; missing_key: string }[]
  shadowRejects: ShadowReject[]
  /** The bearer token: verified, rejected (and why), or claims not verified; absent without one. */
  jwtNote?: string
  llm?: LlmReport[]
  settled?: StatusSettlement[]
}

/** The per-request record the observer fills. */
interface Current {
  planned: PlannedLimit[]
  skipped: OfflineResult['skipped']
  shadowRejects: ShadowReject[]
  details: (string | undefined)[]
}

export class OfflineGateway {
  private cur: Current = { planned: [], skipped: [], shadowRejects: [], details: [] }
  private readonly store: RecordingStore
  private readonly engine: Engine
  private readonly slots: SimulatedSlots

  private constructor(
    readonly bundle: CompiledBundle,
    readonly paths: PathSettings,
    private readonly net: NetworkData,
    private readonly jwt: JwtVerifier | undefined,
    private readonly holds: SimulatedHolds,
    storeBytes: number,
  ) {
    const observer: EngineObserver = {
      outcome: (i, _allowed, _value, detail) => (this.cur.details[i] = detail),
      descriptorMissing: (key, policy, rule) => this.cur.skipped.push({ policy, rule, missing_key: key }),
      shadowReject: (r) => this.cur.shadowRejects.push(r),
      storeError: (err) => process.stderr.write(`fairvisor test: store error: ${err.message}\n`),
      limitPlanned: (l) => this.cur.planned.push(l),
    }
    this.store = new RecordingStore(new MemoryStore({ maxBytes: storeBytes }))
    this.engine = new Engine({ store: this.store, failPolicy: 'open', observer })
    this.slots = new SimulatedSlots(this.store)
  }

  /**
   * Reads the settings and loads the bundle at `loadAt` (epoch ms), writing what is wrong to stderr:
   * the gateway, or the exit code (2 a bad setting, 1 a bad bundle). `storeBytes` is read among the settings.
   */
  static open(bundlePath: string, loadAt: number, storeBytes: () => number): OfflineGateway | number {
    let parts: [PathSettings, NetworkData, JwtVerifier | undefined, SimulatedHolds, number]
    let mode: ReturnType<typeof modeSetting>
    try {
      mode = modeSetting()
      parts = [
        pathSettings(),
        new NetworkData(networkFiles()),
        createJwtVerifier(jwtSettings()),
        new SimulatedHolds(maxDelayedSetting()),
        storeBytes(),
      ]
    } catch (err) {
      if (!(err instanceof SettingError)) throw err
      process.stderr.write(`fairvisor test: invalid setting ${err.message}\n`)
      return 2
    }
    const loaded = loadBundleFile(bundlePath, loadAt, { mode })
    if (!loaded.ok) {
      for (const e of loaded.errors) process.stderr.write(`error: ${e}\n`)
      process.stderr.write(`fairvisor test: the bundle is invalid; run fairvisor validate ${bundlePath}\n`)
      return 1
    }
    for (const d of loaded.dropped) process.stderr.write(`warning: policy dropped: ${d}\n`)
    for (const w of loaded.warnings) process.stderr.write(`warning: ${w}\n`)
    return new OfflineGateway(loaded.bundle, ...parts)
  }

  /** Bearer tokens are verified (a key source is set); otherwise their claims are decoded. */
  get verifiesJwt(): boolean {
    return this.jwt !== undefined
  }

  /**
   * `s` at `startMs` + `s.at` seconds: decided, held, its response status and LLM answer settled; its
   * concurrency slots taken for `s.hold` seconds once forwarded (exchanges ended by then first).
   */
  async run(s: SampleRequest, startMs: number): Promise<OfflineResult> {
    const cur: Current = { planned: [], skipped: [], shadowRejects: [], details: [] }
    this.cur = cur
    this.store.last = []
    this.slots.endUpTo(startMs / 1000 + s.at)
    const nowMs = startMs + s.at * 1000
    const token = bearerToken(rawHeader(s.input.rawHeaders, 'authorization'))
    let input = s.input
    let jwtNote: string | undefined
    if (token !== undefined && this.jwt === undefined) jwtNote = NOT_VERIFIED
    else if (token !== undefined) {
      const r = await this.jwt!.verify(token, nowMs)
      input = { ...s.input, verifiedClaims: r.claims }
      jwtNote = r.claims === null ? `rejected: ${r.rejected}, its claims are not read` : 'verified'
    }
    const evaluated = await new Promise<Decision>((resolve) =>
      this.engine.evaluate(this.bundle, new RequestView(input, undefined, this.net), nowMs, true, resolve),
    )
    const outcomes = cur.planned.length ? this.store.last : []
    const nowS = startMs / 1000 + s.at
    const decision = this.holds.hold(evaluated, s.at, this.store, nowS)
    this.slots.hold(decision, nowS + (decision.delayMs ?? 0) / 1000 + s.hold)
    return {
      decision,
      refused: decision !== evaluated,
      planned: cur.planned,
      outcomes,
      details: cur.details,
      skipped: cur.skipped,
      shadowRejects: cur.shadowRejects,
      jwtNote,
      llm: llmReport(decision, s.response, this.store, nowS),
      settled: settleStatus(decision, s.status, this.store, nowS),
    }
  }

  close(): Promise<void> {
    return this.store.close()
  }
}

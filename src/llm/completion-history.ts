/**
 * The recent completions of each key of a token_bucket_llm rule with a
 * percentile `reservation` (`"p90"`; docs/llm.md "Reservations"): the last
 * SAMPLES settled completion sizes per choice, per counter key, so a request
 * can reserve what that key's calls really use rather than the max_tokens
 * they all ask for. Recorded at settlement (llm/exchange.ts) from the
 * reported usage or the streamed count, read when a request is planned
 * (engine/llm-plan.ts). In memory, per thread: each gateway process (and
 * each worker thread) learns its own keys' sizes; a key it has not seen
 * MIN_SAMPLES times yet reserves `default`. Bounded: least recently used keys
 * out past MAX_KEYS.
 */
import { boundedCache, mapKeyOk } from '../bounded-cache.js'

/** Completions kept per key: enough for a p90 to be more than the largest of ten, little enough to follow a change. */
export const SAMPLES = 32
/** Completions a key needs before its percentile is used. */
export const MIN_SAMPLES = 8
const MAX_KEYS = 50_000

interface Ring {
  values: number[]
  next: number
}

export class CompletionHistory {
  private readonly keys = boundedCache<string, Ring>(MAX_KEYS)

  /** One settled call of `key`: `completion` tokens per choice. */
  record(key: string, completion: number): void {
    if (!Number.isFinite(completion) || completion < 0 || !mapKeyOk(key)) return
    let r = this.keys.get(key)
    if (r === undefined) {
      r = { values: [], next: 0 }
      this.keys.set(key, r)
    }
    if (r.values.length < SAMPLES) r.values.push(completion)
    else r.values[r.next] = completion
    r.next = (r.next + 1) % SAMPLES
  }

  /** The `p`-th percentile (nearest rank) of `key`'s recent completions, rounded up; undefined before MIN_SAMPLES of them. */
  percentile(key: string, p: number): number | undefined {
    const r = mapKeyOk(key) ? this.keys.get(key) : undefined
    if (r === undefined || r.values.length < MIN_SAMPLES) return undefined
    const sorted = [...r.values].sort((a, b) => a - b)
    return Math.ceil(sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!)
  }
}

/** The thread's history, shared by every rule (keys carry the rule's name). */
export const completionHistory = new CompletionHistory()

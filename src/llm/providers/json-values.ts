/**
 * The checks every provider reader makes on the JSON it reads: an object, a token count, an
 * output cap. One copy, so Gemini, Bedrock and Ollama read numbers alike.
 */
export type Obj = Record<string, unknown>

export const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v)

/** A usage count: a finite number ≥ 0, else undefined (a field of another shape is not a count). */
export const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined)

/** An output cap: a positive number or an integer written as a string, rounded up; undefined for none. */
export function positiveCap(v: unknown): number | undefined {
  if (typeof v === 'string' && /^\s*\d+\s*$/.test(v)) v = Number(v)
  return typeof v === 'number' && v > 0 && Number.isFinite(v) ? Math.ceil(v) : undefined
}

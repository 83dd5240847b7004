/**
 * The `dynamic_metadata` of a ShouldRateLimit answer (envoyproxy/ratelimit's
 * RESPONSE_DYNAMIC_METADATA): a google.protobuf.Struct holding the request's
 * `domain`, its `descriptors` (each `entries` as `key=value` strings, its
 * `limit` override as protobuf text, its own `hitsAddend`), the request's
 * `hitsAddend` when not 0, and `metadata`: the configured `metadata:` of the
 * limits of the descriptors that passed, merged in request order. Envoy puts
 * it in the request's dynamic metadata under the rate limit filter's name.
 * Structs are built as the protobuf codec takes them (protobufjs's own
 * struct.proto, whose field names are camelCase); pure, no I/O.
 */

/** google.protobuf.Value, one of its kinds set. */
export type StructValue =
  | { nullValue: 0 }
  | { numberValue: number }
  | { stringValue: string }
  | { boolValue: boolean }
  | { structValue: Struct }
  | { listValue: { values: StructValue[] } }

/** google.protobuf.Struct. */
export interface Struct {
  fields: Record<string, StructValue>
}

/** A value read from YAML (or JSON) as a Struct value, as envoyproxy/ratelimit converts its `metadata:`. */
export function toValue(v: unknown): StructValue {
  if (v === null || v === undefined) return { nullValue: 0 }
  if (typeof v === 'number') return { numberValue: v }
  if (typeof v === 'bigint') return { numberValue: Number(v) }
  if (typeof v === 'boolean') return { boolValue: v }
  if (typeof v === 'string') return { stringValue: v }
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } }
  if (typeof v === 'object') return { structValue: toStruct(v as Record<string, unknown>) }
  return { stringValue: String(v) }
}

/** `fields[k] = v`, a key `__proto__` (the configuration's text) included as a field, not as the object's prototype. */
function setField(fields: Record<string, StructValue>, k: string, v: StructValue): void {
  if (k === '__proto__') Object.defineProperty(fields, k, { value: v, enumerable: true, writable: true, configurable: true })
  else fields[k] = v
}

export function toStruct(o: Record<string, unknown>): Struct {
  const fields: Record<string, StructValue> = {}
  for (const [k, v] of Object.entries(o)) setField(fields, k, toValue(v))
  return { fields }
}

/**
 * `src` merged into `dest` as envoyproxy/ratelimit merges the passed limits' metadata: a field
 * `dest` already has keeps its value, except that two structs are merged field by field. A struct
 * merged into is copied first: `dest`'s values may be a configuration's own, never changed here.
 */
export function mergeStruct(dest: Struct, src: Struct): void {
  for (const k of Object.keys(src.fields)) {
    const v = src.fields[k]!
    const had = Object.hasOwn(dest.fields, k) ? dest.fields[k] : undefined
    if (had === undefined) setField(dest.fields, k, v)
    else if ('structValue' in had && 'structValue' in v) {
      const copy: Struct = { fields: { ...had.structValue.fields } }
      mergeStruct(copy, v.structValue)
      setField(dest.fields, k, { structValue: copy })
    }
  }
}

/** envoy.type.v3.RateLimitUnit names, by number. */
const UNIT_NAMES = ['UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR', 'WEEK']

/** A RateLimitOverride as Go's protobuf String() prints it (text format, one line, zero fields left out). */
export function overrideText(o: { requests_per_unit?: number; unit?: number }): string {
  const parts: string[] = []
  if (o.requests_per_unit) parts.push(`requests_per_unit:${o.requests_per_unit}`)
  if (o.unit) parts.push(`unit:${UNIT_NAMES[o.unit] ?? o.unit}`)
  return parts.join(' ')
}

/** What the answer's metadata tells of the request: the fields of RateLimitRequest it reads. */
export interface MetadataRequest {
  domain?: string
  descriptors?: ReadonlyArray<{
    entries?: ReadonlyArray<{ key?: string; value?: string }>
    limit?: { requests_per_unit?: number; unit?: number } | null
    hits_addend?: { value?: number } | null
  }>
  hits_addend?: number
}

function descriptorStruct(d: NonNullable<MetadataRequest['descriptors']>[number]): Struct {
  const entries = (d.entries ?? []).map((e): StructValue => ({ stringValue: `${e.key ?? ''}=${e.value ?? ''}` }))
  const fields: Record<string, StructValue> = { entries: { listValue: { values: entries } } }
  if (d.limit !== undefined && d.limit !== null) fields.limit = { stringValue: overrideText(d.limit) }
  if (d.hits_addend !== undefined && d.hits_addend !== null) fields.hitsAddend = { numberValue: Number(d.hits_addend.value ?? 0) }
  return { fields }
}

/** The answer's `dynamic_metadata`; `passed`: the metadata of the passed descriptors' limits, in request order. */
export function dynamicMetadata(req: MetadataRequest, passed: readonly Struct[]): Struct {
  const fields: Record<string, StructValue> = {
    domain: { stringValue: req.domain ?? '' },
    descriptors: { listValue: { values: (req.descriptors ?? []).map((d) => ({ structValue: descriptorStruct(d) })) } },
  }
  if (req.hits_addend) fields.hitsAddend = { numberValue: req.hits_addend }
  if (passed.length > 0) {
    const merged: Struct = { fields: {} }
    for (const m of passed) mergeStruct(merged, m)
    if (Object.keys(merged.fields).length > 0) fields.metadata = { structValue: merged }
  }
  return { fields }
}

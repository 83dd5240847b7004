/**
 * The bound on descriptors per ShouldRateLimit call
 * (FAIRVISOR_RLS_MAX_DESCRIPTORS), checked on the request's bytes before they
 * are decoded: decoding is itself the largest cost of a huge call (a 4 MiB
 * message of one-entry descriptors takes protobufjs over half a second), so
 * the count walks the message's top-level fields only, stepping over each
 * field's bytes, and stops once past the bound.
 */
import { GrpcStatus } from './status.js'
import { GrpcFailure } from './wire.js'

/** RateLimitRequest.descriptors (envoy/service/ratelimit/v3/rls.proto): field 2, length-delimited. */
const DESCRIPTORS_TAG = (2 << 3) | 2

/**
 * How many descriptors the encoded RateLimitRequest `b` holds, counted up to
 * `stopAbove + 1`. Bytes that are not a well-formed message end the count
 * where they stop making sense: the decoder then refuses them.
 */
export function countDescriptors(b: Uint8Array, stopAbove: number): number {
  const end = b.length
  let at = 0
  let n = 0
  let field = -1 // the tag whose value or length is read next; -1: a tag comes next
  while (at < end && n <= stopAbove) {
    let v = 0
    for (let mul = 1; ; mul *= 128) {
      if (at >= end || mul > 2 ** 63) return n // cut inside a varint, or one past 10 bytes
      const byte = b[at++]!
      v += (byte & 0x7f) * mul
      if (byte < 0x80) break
    }
    if (field !== -1) {
      if (field % 8 === 2) {
        at += v // a length: the field's bytes are stepped over
        if (field === DESCRIPTORS_TAG) n++
      }
      field = -1
      continue
    }
    const type = v % 8
    if (type === 0 || type === 2) field = v
    else if (type === 1) at += 8
    else if (type === 5) at += 4
    else return n // groups: not in this message
  }
  return n
}

/** The refusal of a call carrying more than `max` descriptors (`refused` counts it), or undefined. */
export function descriptorCap(max: number, refused: () => void): (bytes: Uint8Array) => GrpcFailure | undefined {
  const failure = new GrpcFailure(
    GrpcStatus.RESOURCE_EXHAUSTED,
    `more than ${max} descriptors in one ShouldRateLimit call (FAIRVISOR_RLS_MAX_DESCRIPTORS)`,
  )
  return (bytes) => {
    if (countDescriptors(bytes, max) <= max) return undefined
    refused()
    return failure
  }
}

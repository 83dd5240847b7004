/**
 * SipHash (Aumasson & Bernstein, 2012): a keyed hash made so that, without the
 * 128-bit key, nobody can compute inputs that collide. Hash tables whose keys
 * come from clients use it against hash flooding (Rust, Python and Ruby use
 * SipHash-1-3). The in-process tables pick a key's bucket with it under a
 * random per-process key, so a client cannot compute keys that share a bucket.
 *
 * 64-bit words are handled as int32 halves in local variables, the rounds
 * written out in one function: no BigInt, no allocation, about 2× faster than
 * the same code spread over helper functions sharing module state.
 */

/** A SipHash key as four int32: k0 low, k0 high, k1 low, k1 high (the 16 key bytes, little-endian). */
export function sipKey(bytes: Uint8Array): Int32Array {
  if (bytes.length !== 16) throw new RangeError('a SipHash key is 16 bytes')
  const k = new Int32Array(4)
  for (let i = 0; i < 4; i++) k[i] = bytes[i * 4]! | (bytes[i * 4 + 1]! << 8) | (bytes[i * 4 + 2]! << 16) | (bytes[i * 4 + 3]! << 24)
  return k
}

/**
 * SipHash-c-d under key `k` (sipKey) of the bytes of `s`: with `wide`, its
 * UTF-16LE bytes (what Buffer.from(s, 'utf16le') holds: the key path, no
 * encoding pass); without, one byte per character (its low 8 bits: the
 * reference vectors). The 64-bit result goes to out[at] (high half) and
 * out[at + 1] (low half).
 */
export function sipHash(k: Int32Array, s: string, wide: boolean, c: number, d: number, out: Int32Array, at: number): void {
  // "somepseudorandomlygeneratedbytes" xor the key.
  let v0h = k[1]! ^ 0x736f6d65
  let v0l = k[0]! ^ 0x70736575
  let v1h = k[3]! ^ 0x646f7261
  let v1l = k[2]! ^ 0x6e646f6d
  let v2h = k[1]! ^ 0x6c796765
  let v2l = k[0]! ^ 0x6e657261
  let v3h = k[3]! ^ 0x74656462
  let v3l = k[2]! ^ 0x79746573
  const n = s.length
  const per = wide ? 4 : 8 // characters per 64-bit word
  const whole = n - (n % per)
  const bytes = wide ? 2 * n : n
  let i = 0
  let mh = 0
  let ml = 0
  // Words of the message, then the last word (tail bytes, length in the top byte), then finalisation.
  for (let phase = 0; phase < 3; ) {
    let rounds = c
    if (i < whole) {
      if (wide) {
        ml = s.charCodeAt(i) | (s.charCodeAt(i + 1) << 16)
        mh = s.charCodeAt(i + 2) | (s.charCodeAt(i + 3) << 16)
      } else {
        ml = lo8(s, i) | (lo8(s, i + 1) << 8) | (lo8(s, i + 2) << 16) | (lo8(s, i + 3) << 24)
        mh = lo8(s, i + 4) | (lo8(s, i + 5) << 8) | (lo8(s, i + 6) << 16) | (lo8(s, i + 7) << 24)
      }
      i += per
      if (i >= whole) phase = 1
    } else if (phase <= 1) {
      ml = 0
      mh = (bytes & 0xff) << 24
      for (let j = whole; j < n; j++) {
        const shift = wide ? 16 * (j - whole) : 8 * (j - whole)
        const v = wide ? s.charCodeAt(j) : lo8(s, j)
        if (shift < 32) ml |= v << shift
        else mh |= v << (shift - 32)
      }
      phase = 2
    } else {
      mh = 0
      ml = 0
      v2l ^= 0xff
      rounds = d
      phase = 3
    }
    v3h ^= mh
    v3l ^= ml
    for (let r = 0; r < rounds; r++) {
      // v0 += v1; v1 = rotl(v1, 13) ^ v0; v0 = rotl(v0, 32)
      let lo = (v0l + v1l) | 0
      v0h = (v0h + v1h + (lo >>> 0 < v0l >>> 0 ? 1 : 0)) | 0
      v0l = lo
      let h = (v1h << 13) | (v1l >>> 19)
      let l = (v1l << 13) | (v1h >>> 19)
      v1h = h ^ v0h
      v1l = l ^ v0l
      h = v0h
      v0h = v0l
      v0l = h
      // v2 += v3; v3 = rotl(v3, 16) ^ v2
      lo = (v2l + v3l) | 0
      v2h = (v2h + v3h + (lo >>> 0 < v2l >>> 0 ? 1 : 0)) | 0
      v2l = lo
      h = (v3h << 16) | (v3l >>> 16)
      l = (v3l << 16) | (v3h >>> 16)
      v3h = h ^ v2h
      v3l = l ^ v2l
      // v0 += v3; v3 = rotl(v3, 21) ^ v0
      lo = (v0l + v3l) | 0
      v0h = (v0h + v3h + (lo >>> 0 < v0l >>> 0 ? 1 : 0)) | 0
      v0l = lo
      h = (v3h << 21) | (v3l >>> 11)
      l = (v3l << 21) | (v3h >>> 11)
      v3h = h ^ v0h
      v3l = l ^ v0l
      // v2 += v1; v1 = rotl(v1, 17) ^ v2; v2 = rotl(v2, 32)
      lo = (v2l + v1l) | 0
      v2h = (v2h + v1h + (lo >>> 0 < v2l >>> 0 ? 1 : 0)) | 0
      v2l = lo
      h = (v1h << 17) | (v1l >>> 15)
      l = (v1l << 17) | (v1h >>> 15)
      v1h = h ^ v2h
      v1l = l ^ v2l
      h = v2h
      v2h = v2l
      v2l = h
    }
    v0h ^= mh
    v0l ^= ml
  }
  out[at] = v0h ^ v1h ^ v2h ^ v3h
  out[at + 1] = v0l ^ v1l ^ v2l ^ v3l
}

const lo8 = (s: string, i: number): number => s.charCodeAt(i) & 0xff

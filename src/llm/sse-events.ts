/**
 * Where server-sent events end in a byte stream that arrives in chunks: an
 * empty line ends an event, and a line ends at CRLF, LF or CR (the WHATWG
 * event-stream rules). A CR that ends a chunk is decided by the next
 * chunk's first byte (an LF there belongs to it), so an event ending with
 * such a CR is known to have ended only then: its end then falls at offset
 * 0 or 1 of the next chunk.
 */
const LF = 10
const CR = 13

export class EventEnds {
  /** The next byte starts a line: the stream's start, or just after a line end. */
  private lineStart = true
  /** The last chunk ended with a CR ending a line: `blank` when that line was empty (an event ended there). */
  private crLast: 'blank' | 'line' | undefined

  /** The offsets in `c` just past each event end (its empty line's line end), in order. */
  in(c: Buffer): number[] {
    const out: number[] = []
    let i = 0
    if (this.crLast !== undefined && c.length > 0) {
      if (c[0] === LF) i = 1
      if (this.crLast === 'blank') out.push(i)
      this.crLast = undefined
    }
    // The next LF and CR at or after i, each searched again only once passed: linear in the chunk.
    let lf = c.indexOf(LF, i)
    let cr = c.indexOf(CR, i)
    while (i < c.length) {
      if (lf !== -1 && lf < i) lf = c.indexOf(LF, i)
      if (cr !== -1 && cr < i) cr = c.indexOf(CR, i)
      const t = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr)
      if (t === -1) {
        this.lineStart = false
        break
      }
      const blank = this.lineStart && t === i
      this.lineStart = true
      if (t === cr) {
        if (t + 1 === c.length) {
          this.crLast = blank ? 'blank' : 'line'
          break
        }
        i = c[t + 1] === LF ? t + 2 : t + 1
      } else i = t + 1
      if (blank) out.push(i)
    }
    return out
  }
}

/**
 * Gemini's `:streamGenerateContent` without `alt=sse`: one JSON array whose elements arrive
 * one by one (`[{…}\n,\r\n{…}\n]`). A frame ends just after the `}` that closes an element;
 * the separator before the next one (`,`, white space) opens the next frame, and the `]`
 * that ends the array is what is left when the stream ends. Strings are skipped with their
 * escapes, so a brace in a text is no end; the bytes are scanned as they are (UTF-8 never
 * puts an ASCII byte inside a character).
 */
import type { Framing } from './framing.js'

const QUOTE = 34
const BACKSLASH = 92
const OPEN_SQUARE = 0x5b
const CLOSE_SQUARE = 0x5d
const OPEN_CURLY = 0x7b
const CLOSE_CURLY = 0x7d

export class JsonArrayFraming implements Framing {
  readonly kind = 'json-array'
  readonly api = 'gemini'
  /** 0 before the array, 1 between its elements, more inside one. */
  private depth = 0
  private inString = false
  private escaped = false

  frameEnds(c: Buffer): number[] {
    const out: number[] = []
    for (let i = 0; i < c.length; i++) {
      const b = c[i]!
      if (this.inString) {
        if (this.escaped) this.escaped = false
        else if (b === BACKSLASH) this.escaped = true
        else if (b === QUOTE) this.inString = false
        continue
      }
      if (b === QUOTE) this.inString = true
      else if (b === OPEN_SQUARE || b === OPEN_CURLY) this.depth++
      else if (b === CLOSE_SQUARE || b === CLOSE_CURLY) {
        // More closed than opened is not JSON: read on as from the start (an element that does not parse is skipped).
        if (this.depth === 0) continue
        if (--this.depth === 1) out.push(i + 1)
      }
    }
    return out
  }

  read(frame: Buffer, emit: (name: string | undefined, data: string) => void): void {
    const text = frame.toString('utf8')
    const start = text.indexOf('{') // past the `[` or `,` and white space before the element
    if (start !== -1) emit(undefined, text.slice(start))
  }
}

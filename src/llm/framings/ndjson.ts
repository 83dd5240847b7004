/**
 * Ollama's streams (`application/x-ndjson`): one JSON object per line. A frame ends just
 * after each LF; a line without its LF is the one held until the next bytes (or passed on
 * as it came at the stream's end).
 */
import type { Framing } from './framing.js'

const LF = 10

export class NdjsonFraming implements Framing {
  readonly kind = 'ndjson'
  readonly api = 'ollama'

  frameEnds(c: Buffer): number[] {
    const out: number[] = []
    for (let at = c.indexOf(LF); at !== -1; at = c.indexOf(LF, at + 1)) out.push(at + 1)
    return out
  }

  read(frame: Buffer, emit: (name: string | undefined, data: string) => void): void {
    const line = frame.toString('utf8').trim()
    if (line !== '') emit(undefined, line)
  }
}

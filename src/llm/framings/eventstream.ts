/**
 * Bedrock's streams (`application/vnd.amazon.eventstream`): binary messages, each a prelude
 * (total length, headers length, CRC32 of the two), headers (`:message-type`,
 * `:event-type`, `:content-type`, …), a JSON payload and the CRC32 of the whole. A frame is
 * one message: its end is known from the prelude's first four bytes, so the meter holds at
 * most one message (and FAIRVISOR_LLM_MAX_EVENT_BYTES bounds a length that lies). Each
 * message is decoded, both checksums checked, by AWS's own codec (`@smithy/core`, the one
 * the AWS SDKs read these streams with); a message that fails them is unreadable. The
 * events the gateway writes are encoded by the same codec. InvokeModel's `chunk` events
 * carry the model's own event as base64 `bytes`: that event is what is read.
 */
import { createRequire } from 'node:module'
import type { EventStreamCodec, MessageHeaders } from '@smithy/core/event-streams'
import type { Framing } from './framing.js'

const require = createRequire(import.meta.url)
let loaded: EventStreamCodec | undefined

/** The codec, loaded on the first Bedrock stream (≈ 35 ms once), not at every start-up. */
function codec(): EventStreamCodec {
  if (loaded === undefined) {
    const m = require('@smithy/core/event-streams') as typeof import('@smithy/core/event-streams')
    loaded = new m.EventStreamCodec(
      (b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8'),
      (s) => Buffer.from(s, 'utf8'),
    )
  }
  return loaded
}

/** The smallest message: prelude (12 bytes) and message CRC (4), no headers, no payload. */
const MIN_MESSAGE = 16

export class EventStreamFraming implements Framing {
  readonly kind = 'eventstream'
  readonly api = 'bedrock'
  /** Bytes of the current message not yet seen (0: the next byte starts a message). */
  private left = 0
  /** The total length's first bytes, when a chunk ended inside them. */
  private length: number[] = []

  frameEnds(c: Buffer): number[] {
    const out: number[] = []
    let i = 0
    while (i < c.length) {
      if (this.left === 0) {
        while (this.length.length < 4 && i < c.length) this.length.push(c[i++]!)
        if (this.length.length < 4) break
        const [a, b, d, e] = this.length as [number, number, number, number]
        const total = ((a << 24) | (b << 16) | (d << 8) | e) >>> 0
        this.length = []
        if (total < MIN_MESSAGE) {
          // No message is this short: the frame ends here, and reading it fails (the stream ends before it).
          out.push(i)
          continue
        }
        this.left = total - 4
      }
      const take = Math.min(this.left, c.length - i)
      i += take
      this.left -= take
      if (this.left === 0) out.push(i)
    }
    return out
  }

  read(frame: Buffer, emit: (name: string | undefined, data: string) => void): void {
    const { headers, body } = codec().decode(frame)
    if (text(headers, ':message-type') !== 'event') return // an exception passes on unread
    const name = text(headers, ':event-type')
    const payload = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8')
    if (name === 'chunk') {
      const bytes = (JSON.parse(payload) as { bytes?: unknown }).bytes
      if (typeof bytes === 'string') emit(undefined, Buffer.from(bytes, 'base64').toString('utf8'))
      return
    }
    emit(name, payload)
  }
}

function text(h: MessageHeaders, name: string): string | undefined {
  const v = h[name]
  return v?.type === 'string' ? v.value : undefined
}

/** One message as Bedrock writes it: an event (or an exception) of `type` with a JSON payload. */
export function eventMessage(type: string, payload: object, exception = false): Buffer {
  const headers: MessageHeaders = {
    [exception ? ':exception-type' : ':event-type']: { type: 'string', value: type },
    ':content-type': { type: 'string', value: 'application/json' },
    ':message-type': { type: 'string', value: exception ? 'exception' : 'event' },
  }
  const m = codec().encode({ headers, body: Buffer.from(JSON.stringify(payload), 'utf8') })
  return Buffer.from(m.buffer, m.byteOffset, m.byteLength)
}

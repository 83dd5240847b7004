/**
 * An LLM upstream that sends one enormous SSE event (`data: ` + 1.5 GiB of
 * one character, gzip-compressed on the fly: about 1.5 MB on the wire)
 * through the real gateway process: the relay ends that stream once the
 * event passes FAIRVISOR_LLM_MAX_EVENT_BYTES (default 8m), the official
 * SDKs get the API's own error event after the events before it, the
 * upstream call is dropped (it stops generating), and the gateway stays up
 * with its memory high-water mark far below the event's size.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createGzip } from 'node:zlib'
import { after, before, describe, test } from 'node:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { metricValue, startBackend, startGateway, type Backend, type GatewayProcess } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

const HUGE = 1.5 * 1024 ** 3
const BLOCK = Buffer.alloc(1024 * 1024, 'a')
const MESSAGES = [{ role: 'user' as const, content: 'hi' }]

/** Bytes of the huge event each stream generated before the gateway dropped the call. */
const generated: number[] = []

function chatEvent(text: string, finish: string | null = null): string {
  const choice = { index: 0, delta: { content: text }, finish_reason: finish }
  return `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [choice] })}\n\n`
}

const MESSAGES_HEAD =
  'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}\n\n' +
  'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n' +
  'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n'

/** `head` (whole events), then `prefix` + HUGE bytes of 'a' + a blank line, gzip-compressed as it is generated. */
function hugeStream(res: ServerResponse, head: string, prefix: string): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' })
  const gz = createGzip()
  gz.pipe(res)
  const at = generated.push(0) - 1
  let stopped = false
  res.once('close', () => {
    stopped = true
    gz.destroy()
  })
  gz.write(head)
  gz.flush() // the whole events reach the gateway before the huge one starts
  gz.write(prefix)
  const pump = (): void => {
    while (!stopped && generated[at]! < HUGE) {
      generated[at]! += BLOCK.length
      if (!gz.write(BLOCK)) return void gz.once('drain', pump)
    }
    if (!stopped) gz.end('\n\n')
  }
  pump()
}

function upstreamAnswer(req: IncomingMessage, res: ServerResponse): void {
  req.resume()
  req.on('end', () => {
    const huge = req.headers['x-huge'] === '1'
    if (req.url!.endsWith('/messages'))
      return huge
        ? hugeStream(res, MESSAGES_HEAD, 'event: content_block_delta\ndata: ')
        : void res
            .writeHead(200, { 'content-type': 'text/event-stream' })
            .end(`${MESSAGES_HEAD}event: message_stop\ndata: {"type":"message_stop"}\n\n`)
    if (huge) return hugeStream(res, chatEvent('Hi'), 'data: ')
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.end(`${chatEvent('Hi')}${chatEvent(' there', 'stop')}data: [DONE]\n\n`)
  })
}

let upstream: Backend
let gw: GatewayProcess

function vmHwmKb(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(m![1])
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p
  } catch (err) {
    return err as Error
  }
  assert.fail('the call succeeded')
}

describe('one huge SSE event from the upstream', { timeout: 120_000 }, () => {
  before(async () => {
    upstream = await startBackend(upstreamAnswer)
    const file = join(mkdtempSync(join(tmpdir(), 'fv-huge-')), 'bundle.json')
    const rule = {
      name: 'tokens',
      limit_keys: ['header:x-tenant'],
      algorithm: 'token_bucket_llm',
      algorithm_config: { tokens_per_minute: 1_000_000 },
    }
    writeFileSync(
      file,
      JSON.stringify({ bundle_version: 1, policies: [{ id: 'llm', spec: { selector: { pathPrefix: '/' }, rules: [rule] } }] }),
    )
    gw = await startGateway({ FAIRVISOR_BACKEND_URL: upstream.url, FAIRVISOR_CONFIG_FILE: file, FAIRVISOR_STORE: 'memory' })
  })

  after(async () => {
    const code = await gw?.stop()
    await upstream?.close()
    assert.equal(code, 0)
  })

  test("ends that stream with the API's error event; the gateway stays up with its memory bounded", async () => {
    // Read as a plain client that keeps nothing of what it gets (no SDK buffering a huge line).
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-tenant': 't0', 'x-huge': '1' },
      body: JSON.stringify({ model: 'm', messages: MESSAGES, stream: true }),
    })
    assert.equal(res.status, 200)
    let bytes = 0
    let text = ''
    for await (const c of res.body as AsyncIterable<Uint8Array>) {
      bytes += c.length
      if (text.length < 65536) text += Buffer.from(c).toString('utf8')
    }
    assert.ok(bytes < 65536, `the client got ${bytes} bytes`)
    const [first, error, ...more] = text.split('\n\n')
    assert.equal(`${first}\n\n`, chatEvent('Hi'))
    assert.deepEqual(JSON.parse(error!.slice('data: '.length)), {
      error: {
        message: 'the upstream sent a stream event larger than 8388608 bytes; the stream was ended',
        type: 'server_error',
        param: null,
        code: 'upstream_event_too_large',
      },
    })
    assert.deepEqual(more, [''])

    // What the official SDKs make of it: the text so far, then their API error.
    const openai = (huge: boolean): OpenAI =>
      new OpenAI({
        apiKey: 'sk-test',
        baseURL: `${gw.url}/v1`,
        maxRetries: 0,
        defaultHeaders: { 'x-tenant': 't1', 'x-huge': huge ? '1' : '0' },
      })
    const texts: string[] = []
    const err = await rejection(
      (async () => {
        const stream = await openai(true).chat.completions.create({ model: 'm', messages: MESSAGES, stream: true })
        for await (const chunk of stream) texts.push(chunk.choices[0]?.delta.content ?? '')
      })(),
    )
    assert.ok(err instanceof OpenAI.APIError && !(err instanceof OpenAI.APIConnectionError), `not the API's error event: ${err}`)
    assert.match(err.message, /event larger than 8388608 bytes/)
    assert.deepEqual(texts, ['Hi'])
    const anthropic = new Anthropic({
      apiKey: 'sk-ant',
      baseURL: gw.url,
      maxRetries: 0,
      defaultHeaders: { 'x-tenant': 't2', 'x-huge': '1' },
    })
    const deltas: string[] = []
    const aerr = await rejection(
      (async () => {
        const stream = await anthropic.messages.create({ model: 'm', max_tokens: 100, messages: MESSAGES, stream: true })
        for await (const ev of stream) if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') deltas.push(ev.delta.text)
      })(),
    )
    assert.ok(aerr instanceof Anthropic.APIError && !(aerr instanceof Anthropic.APIConnectionError), `not the API's error event: ${aerr}`)
    assert.match(aerr.message, /"type":"api_error".*event larger than 8388608 bytes/)
    assert.deepEqual(deltas, ['Hi'])

    // Still serving, and a normal stream is untouched.
    const normal: string[] = []
    for await (const chunk of await openai(false).chat.completions.create({ model: 'm', messages: MESSAGES, stream: true }))
      normal.push(chunk.choices[0]?.delta.content ?? '')
    assert.deepEqual(normal, ['Hi', ' there'])
    const hwm = vmHwmKb(gw.proc.pid!)
    assert.ok(hwm < 200 * 1024, `gateway peak RSS ${Math.round(hwm / 1024)} MB`)
    // The upstream stopped once the gateway dropped each call, long before the event's end.
    assert.equal(generated.length, 3)
    for (const n of generated) assert.ok(n < HUGE / 2, `the upstream generated ${n} bytes`)
    await waitFor(async () => (await metricValue(gw, 'fairvisor_llm_stream_cuts_total', 'reason="event_too_large"')) === 3, 'cuts counted')
    const line = await gw.waitForLog((l) => l.event === 'llm_event_too_large' && l.api === 'messages')
    assert.equal(line.max_event_bytes, 8 * 1024 ** 2)
    assert.equal(line.level, 'warn')
  })
})

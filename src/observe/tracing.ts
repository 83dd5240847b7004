/**
 * Traces: OpenTelemetry spans, exported over OTLP/HTTP (docs/tracing.md). Off unless an endpoint is set
 * (settings-trace.ts); then every thread that serves has its own tracer and exporter (tracing-sdk.ts,
 * loaded only then, so a gateway without traces never loads the SDK).
 *
 * The hot path reads `tracer` once per request: null, and nothing else here runs (no span, no context,
 * no closure). A span's parent is passed explicitly (a request's Context rides in its RequestInput down
 * to the store call), never through a context manager: AsyncLocalStorage would charge every request,
 * traced or not, and the SDK needs none when each span is started with its parent.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
  type Tracer,
} from '@opentelemetry/api'
import { ATTR_DB_OPERATION_BATCH_SIZE, ATTR_ERROR_TYPE } from '@opentelemetry/semantic-conventions'
import type { TraceSettings } from '../settings-trace.js'

/** This thread's tracer while tracing is on; null while it is off. */
export let tracer: Tracer | null = null
let propagator: TextMapPropagator | null = null

/** The gateway's own span attributes (the HTTP, RPC and database ones are the semantic conventions'). */
export const ATTR = {
  policy: 'fairvisor.policy',
  rule: 'fairvisor.rule',
  action: 'fairvisor.action',
  reason: 'fairvisor.reason',
  mode: 'fairvisor.mode',
  store: 'fairvisor.store',
  failOpen: 'fairvisor.fail_open',
  delayMs: 'fairvisor.delay_ms',
  checks: 'fairvisor.store.checks',
  retries: 'fairvisor.store.retries',
  tokensReserved: 'fairvisor.llm.tokens_reserved',
  tokensSettled: 'fairvisor.llm.tokens_settled',
  worker: 'fairvisor.worker',
} as const

/**
 * Starts this thread's tracing when the settings name an endpoint (`worker`: this thread's worker id, on
 * every span it exports). Resolves with what flushes and stops it at shutdown, or undefined when off.
 */
export async function startTracing(settings: TraceSettings, worker: number | undefined): Promise<(() => Promise<void>) | undefined> {
  if (settings.otlpTracesUrl === undefined) return undefined
  const sdk = await import('./tracing-sdk.js')
  const t = sdk.createTracing(settings, settings.otlpTracesUrl, worker)
  tracer = t.tracer
  propagator = t.propagator
  return async () => {
    tracer = null
    propagator = null
    // The spans still queued leave now, but a collector that does not answer must not hold the exit.
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<void>((r) => (timer = setTimeout(r, FLUSH_MS)))
    await Promise.race([t.shutdown().catch(() => undefined), late])
    clearTimeout(timer)
  }
}

/** The longest the last export may take at shutdown; what it has not sent by then is dropped. */
const FLUSH_MS = 2000

/** A flat [name, value, …] header list (IncomingMessage.rawHeaders) read as a propagation carrier; names are case-insensitive. */
const RAW_HEADERS: TextMapGetter<readonly string[]> = {
  keys(raw) {
    const out: string[] = []
    for (let i = 0; i < raw.length; i += 2) out.push(raw[i]!.toLowerCase())
    return out
  },
  get(raw, key) {
    let out: string[] | undefined
    for (let i = 0; i < raw.length; i += 2)
      if (raw[i]!.length === key.length && raw[i]!.toLowerCase() === key) (out ??= []).push(raw[i + 1]!)
    // Several tracestate lines are one list (W3C Trace Context §3.3.1.1); traceparent takes the first.
    return out === undefined ? undefined : out.length === 1 ? out[0] : out
  },
}

/** A header object (HTTP/2 headers, ext_authz's headers map): keys already lower case. */
const RECORD: TextMapGetter<Readonly<Record<string, string | string[] | undefined>>> = {
  keys: (h) => Object.keys(h),
  get: (h, key) => h[key],
}

const FLAT: TextMapSetter<string[]> = { set: (headers, key, value) => void headers.push(key, value) }

/** The caller's trace context (W3C traceparent / tracestate) from a flat header list; ROOT_CONTEXT when it sent none. */
export function parentFromRaw(raw: readonly string[]): Context {
  return propagator === null ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, raw, RAW_HEADERS)
}

/** The same from a header object; undefined when it holds no valid traceparent (the caller looks elsewhere). */
export function parentFromRecord(headers: Readonly<Record<string, string | string[] | undefined>> | undefined): Context | undefined {
  if (headers === undefined || propagator === null || headers.traceparent === undefined) return undefined
  const ctx = propagator.extract(ROOT_CONTEXT, headers, RECORD)
  return trace.getSpanContext(ctx) === undefined ? undefined : ctx
}

const PROPAGATED = new Set(['traceparent', 'tracestate'])

/** Replaces any traceparent / tracestate of a flat header list by those of `ctx` (its span the parent of what the receiver does). */
export function injectInto(ctx: Context, headers: string[]): void {
  for (let i = headers.length - 2; i >= 0; i -= 2) if (PROPAGATED.has(headers[i]!.toLowerCase())) headers.splice(i, 2)
  propagator?.inject(ctx, headers, FLAT)
}

/** Starts a span under `parent` (tracing must be on: callers have checked `tracer`). */
export function startSpan(name: string, kind: SpanKind, parent: Context, attributes?: Attributes): Span {
  return tracer!.startSpan(name, { kind, attributes }, parent)
}

/** `parent` with `span` as the current span: what a child of `span` is started under. */
export function under(parent: Context, span: Span): Context {
  return trace.setSpan(parent, span)
}

/** The span a context carries (a request's server span, to annotate after its decision). */
export function spanOf(ctx: Context): Span | undefined {
  return trace.getSpan(ctx)
}

/**
 * Whether the span of the gateway's own that `ctx` carries (a server or decision span) is kept
 * (sampled; a caller's remote span is never recording). Under one that is not, no sampler the settings
 * take keeps a child (a parent-based one follows it; a ratio one decides alike on the same trace id),
 * so a request not sampled makes no span past its first, which still carries its trace on.
 */
export function recording(ctx: Context): boolean {
  return trace.getSpan(ctx)?.isRecording() === true
}

/** Ends `span`, an error status and error.type first when `err` is set (its code, else its class name). */
export function endSpan(span: Span, err?: (Error & { code?: unknown }) | null, errorType?: string): void {
  if (err) {
    span.setAttribute(ATTR_ERROR_TYPE, errorType ?? (typeof err.code === 'string' ? err.code : err.constructor.name))
    span.setStatus({ code: SpanStatusCode.ERROR, message: err.message })
  } else if (errorType !== undefined) {
    span.setAttribute(ATTR_ERROR_TYPE, errorType)
    span.setStatus({ code: SpanStatusCode.ERROR })
  }
  span.end()
}

/**
 * One request's call to a remote store (Redis, PostgreSQL), under its decision span: from the call to
 * its answer, time spent waiting for its batch included. The batch itself is a span of its own (batchSpan).
 * undefined under a span not kept (recording()).
 */
export function storeCallSpan(parent: Context, store: string, checks: number): Span | undefined {
  if (tracer === null || !recording(parent)) return undefined
  return tracer.startSpan(
    'fairvisor.store',
    { kind: SpanKind.INTERNAL, attributes: { [ATTR.store]: store, [ATTR.checks]: checks } },
    parent,
  )
}

/** `done` that ends `span` first (with the store's error, if any). */
export function ending<T>(span: Span, done: (err: Error | null, out?: T) => void): (err: Error | null, out?: T) => void {
  return (err, out) => {
    endSpan(span, err)
    done(err, out)
  }
}

/**
 * The span of one batch's round trip to the server (one write of EVALSHAs, one PostgreSQL statement),
 * which serves several requests of several traces: a child of the first sampled request's store-call
 * span, linked to every sampled one's (OpenTelemetry's way for work done for many: a span with links).
 * `calls`: the batch's (those settled already are not sent); `size`: how many are sent. undefined when
 * no request of the batch is sampled (nothing of it would be kept), and at once when tracing is off.
 */
export function batchSpan(
  name: string,
  attributes: Attributes,
  calls: readonly { span?: Span | undefined; settled: boolean }[],
  size: number,
): Span | undefined {
  if (tracer === null) return undefined
  let parent: Span | undefined
  const links: Link[] = []
  for (const c of calls) {
    const s = c.span
    if (s === undefined || c.settled || !s.isRecording()) continue
    parent ??= s
    links.push({ context: s.spanContext() })
  }
  if (parent === undefined) return undefined
  return tracer.startSpan(
    name,
    // A batch of one is no batch to the semantic conventions (db.operation.batch.size is set from two).
    { kind: SpanKind.CLIENT, attributes: size > 1 ? { ...attributes, [ATTR_DB_OPERATION_BATCH_SIZE]: size } : attributes, links },
    trace.setSpan(ROOT_CONTEXT, parent),
  )
}

export { SpanKind, type Context, type Span }

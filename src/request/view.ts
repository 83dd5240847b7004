/**
 * RequestView: the request as the engine sees it. Everything is lazy and
 * memoised, so a request pays only for the inputs some loaded rule reads
 * (a bundle keyed on one header never parses the query or the JWT).
 */
import type { BlockList } from 'node:net'
import type { Context } from '@opentelemetry/api'
import { AmbiguousRequest } from '../errors.js'
import { botCategory, type BotCategory } from './bots.js'
import { clientIp } from './client-ip.js'
import { claimString, decodeBearer, type Claims } from './jwt.js'
import { NetworkData } from './network-data.js'
import { normaliseHost } from './normalise.js'
import { BEARER_SCHEME, rawHeader, sameHeaderName } from './raw-headers.js'
import type { TargetParts, TargetRefusal } from './target.js'
import { parseLlmBody, type LlmBody } from '../llm/request-body.js'
import { llmModel } from './llm-model.js'

/** What the HTTP layer hands over: a proxied request, or the one a sidecar call describes; its target as readTarget (target.ts) reads it. */
export interface RequestInput extends TargetParts {
  method: string
  /** Host header as received (port and case are normalised here). */
  host: string
  /** Flat [name, value, …] list as received. */
  rawHeaders: readonly string[]
  /** Socket peer address. */
  peer: string
  /**
   * Claims already verified by the JWT verifier (null: the token did not
   * verify). Absent when no key source is configured: claims are then decoded.
   */
  verifiedClaims?: Claims | null
  /**
   * The start of the body (its first MiB; more of a chunked one), read only
   * when a matched policy has an LLM rule (http/llm-body.ts); absent
   * otherwise and in decision-service mode.
   */
  body?: Buffer
  /** The entries of a Rate Limit Service descriptor (gRPC ShouldRateLimit), read by `descriptor:<key>`. */
  descriptorEntries?: ReadonlyMap<string, string>
  /** `body` is the whole body. */
  bodyComplete?: boolean
  /**
   * Tracing on (observe/tracing.ts): the trace context this request's spans go under (its server span's,
   * then its decision span's, which the store call is made under); absent when tracing is off.
   */
  trace?: Context
}

export class RequestView {
  readonly method: string
  /** The normalised path (RequestInput.path). */
  readonly path: string
  /** The other readings of the path, matched by selectors and kill-switch routes too. */
  readonly alsoPaths: readonly string[] | undefined
  private readonly input: RequestInput
  private readonly trusted: BlockList | undefined
  private _ip: string | undefined
  private _host: string | undefined
  private _claims: Claims | null | undefined
  private _llm: LlmBody | undefined
  private _model: string | null | undefined
  private _query: URLSearchParams | undefined
  private _country: string | null | undefined
  private _asn: string | null | undefined
  private _bot: BotCategory | '' | undefined
  private _authChecked = false

  /** The operator's ASN map, GeoIP databases and Tor exit list (read by the `ip:` descriptors). */
  readonly net: NetworkData

  constructor(input: RequestInput, trusted: BlockList | undefined, net: NetworkData = NetworkData.none) {
    this.input = input
    this.net = net
    this.method = input.method
    this.path = input.path
    this.alsoPaths = input.alsoPaths
    this.trusted = trusted
  }

  /** The decision span's context of a traced request (RequestInput.trace), which its store call goes under. */
  get trace(): Context | undefined {
    return this.input.trace
  }

  /** Why the request's target is refused (400), if it is. */
  get refused(): TargetRefusal | undefined {
    return this.input.refused
  }

  /** The query string as received, without `?` ('' when none). */
  get rawQuery(): string {
    return this.input.rawQuery
  }

  /** The body as LLM rules read it (parsed once; Content-Length gives the size of what was not held). */
  llmBody(): LlmBody {
    if (this._llm !== undefined) return this._llm
    // A sidecar call has no body: a proxy may pass the original request's length in X-Original-Content-Length.
    const cl = rawHeader(this.input.rawHeaders, 'x-original-content-length') ?? rawHeader(this.input.rawHeaders, 'content-length')
    const n = cl === undefined ? undefined : Number(cl)
    return (this._llm = parseLlmBody(
      this.input.body,
      n !== undefined && Number.isSafeInteger(n) && n >= 0 ? n : undefined,
      this.input.bodyComplete === true,
    ))
  }

  /** `llm:model` (llm-model.ts), read once: a limit key and a price may both ask. */
  llmModel(): string | undefined {
    if (this._model === undefined) this._model = llmModel(this) ?? null
    return this._model ?? undefined
  }

  get host(): string {
    return (this._host ??= normaliseHost(this.input.host))
  }

  get ip(): string {
    return (this._ip ??= clientIp(this.input.peer, this.trusted === undefined ? undefined : this.forwardedFor(), this.trusted))
  }

  /**
   * Every X-Forwarded-For line joined in order: a proxy may append its hop as
   * a new line, and the right-most hop is what counts, so "first value" would
   * hand the client's own forged line to the walk. Only the exact name counts
   * here, or a client could smuggle an `X_Forwarded_For`.
   */
  private forwardedFor(): string | undefined {
    let out: string | undefined
    const raw = this.input.rawHeaders
    for (let i = 0; i < raw.length; i += 2) {
      if (raw[i]!.length === 15 && raw[i]!.toLowerCase() === 'x-forwarded-for')
        out = out === undefined ? raw[i + 1]! : `${out},${raw[i + 1]!}`
    }
    return out
  }

  /**
   * First value of a header; `name` must already be a headerKey(). A scan of
   * rawHeaders, not a map built on first use: a rule reads one or two
   * headers, and building a map lower-cased every name of every request.
   * Limit keys read keyHeader() instead.
   */
  header(name: string): string | undefined {
    const raw = this.input.rawHeaders
    for (let i = 0; i < raw.length; i += 2) if (sameHeaderName(raw[i]!, name)) return raw[i + 1]
    return undefined
  }

  /**
   * The value of a header a limit key reads (`name` a headerKey()): every line of it must
   * carry the same value, else AmbiguousRequest. Backends disagree on a repeated header (Go,
   * Java, nginx before 1.23 read the first line; HAProxy's `req.hdr()` the last; Node and
   * nginx 1.23+ join the lines with `, `), so whichever line the gateway counted, a client
   * could put a fresh value there and the backend read a fixed one in another; joining them
   * would make that same fresh value a fresh key. Still one scan, no map.
   */
  keyHeader(name: string): string | undefined {
    const raw = this.input.rawHeaders
    let out: string | undefined
    for (let i = 0; i < raw.length; i += 2) {
      if (!sameHeaderName(raw[i]!, name)) continue
      if (out === undefined) out = raw[i + 1]!
      else if (raw[i + 1] !== out) throw new AmbiguousRequest(`the header ${name} is repeated with different values`)
    }
    return out
  }

  query(name: string): string | undefined {
    this._query ??= new URLSearchParams(this.input.rawQuery)
    return this._query.get(name) ?? undefined
  }

  /**
   * The value of a query parameter a limit key reads: repeated, every value must be the same,
   * else AmbiguousRequest (PHP and Express's `qs` keep the last or all of them, Go, Java and
   * Flask the first: the same reasoning as keyHeader()).
   */
  keyQuery(name: string): string | undefined {
    this._query ??= new URLSearchParams(this.input.rawQuery)
    const all = this._query.getAll(name)
    for (let i = 1; i < all.length; i++)
      if (all[i] !== all[0]) throw new AmbiguousRequest(`the query parameter ${name} is repeated with different values`)
    return all[0]
  }

  get claims(): Claims | undefined {
    if (this._claims === undefined) {
      const v = this.input.verifiedClaims
      this._claims = v !== undefined ? v : (decodeBearer(this.header('authorization')) ?? null)
    }
    return this._claims ?? undefined
  }

  descriptorEntry(key: string): string | undefined {
    return this.input.descriptorEntries?.get(key)
  }

  claim(name: string): string | undefined {
    const c = this.claims
    return c === undefined ? undefined : claimString(c[name])
  }

  /**
   * A claim as a limit key reads it: the token must be the request's only one. Two
   * Authorization lines with different values, or one that a proxy joined from two (`Bearer
   * a,Bearer b`: a bearer token never holds a comma) are AmbiguousRequest: the claims and the
   * verification come from the first, and a backend that reads the last would authenticate
   * a token the gateway never counted.
   */
  keyClaim(name: string): string | undefined {
    if (!this._authChecked) {
      const auth = this.keyHeader('authorization')
      if (auth?.includes(',') && BEARER_SCHEME.test(auth))
        throw new AmbiguousRequest('the Authorization header holds more than one bearer token')
      this._authChecked = true
    }
    return this.claim(name)
  }

  /** X-Country-Code from the edge, else the GeoIP country database by client address (upper case). */
  get country(): string | undefined {
    if (this._country === undefined) {
      const h = this.header('x-country-code')?.trim()
      this._country = (h ? h.toUpperCase() : this.net.country(this.ip)) || null
    }
    return this._country ?? undefined
  }

  /** X-ASN from the edge, else the GeoIP ASN database by client address. */
  get asn(): string | undefined {
    if (this._asn === undefined) this._asn = this.header('x-asn')?.trim() || this.net.asn(this.ip) || null
    return this._asn ?? undefined
  }

  /** Bot category of the User-Agent; '' when it is not a bot (or there is none). */
  get botCategory(): BotCategory | '' {
    return (this._bot ??= botCategory(this.header('user-agent')))
  }
}

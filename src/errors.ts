/**
 * One catalogue of coded errors. Codes are stable strings operators can grep
 * for in logs and code can branch on (never the message, which is a sentence
 * for people). Bundle problems found by validation are not thrown: they are
 * reported as issues with a file and a JSON pointer (bundle/validate.ts) and
 * counted by reload result; BundleError is for a bundle that cannot be read.
 */
export type ErrorCode =
  | 'FV_SETTING_INVALID'
  | 'FV_DATA_FILE_INVALID'
  | 'FV_BUNDLE_UNREADABLE'
  | 'FV_STORE_UNAVAILABLE'
  | 'FV_STORE_TIMEOUT'
  | 'FV_STORE_PROTOCOL'
  | 'FV_CLIENT_CLOSED'
  | 'FV_LLM_STREAM_CUT'
  | 'FV_REQUEST_AMBIGUOUS'
  | 'FV_GRPC_INVALID_REQUEST'
  | 'FV_GRPC_SERVICE_MISSING'
  | 'FV_RLS_CONFIG_INVALID'
  | 'FV_ADMIN_REQUEST'

/** Abstract: what is thrown is one of the subclasses below, each with its code (test/unit/errors.test.ts). */
export abstract class FairvisorError extends Error {
  readonly code: ErrorCode
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.code = code
    this.name = 'FairvisorError'
  }
}

/** A bad environment variable: the process prints `message` and exits 2. */
export class SettingError extends FairvisorError {
  readonly variable: string
  constructor(variable: string, message: string) {
    super('FV_SETTING_INVALID', `${variable}: ${message}`)
    this.variable = variable
    this.name = 'SettingError'
  }
}

/** A data file (Tor exit list, GeoIP database) whose content is not what its setting names; wrapped in a SettingError at startup, logged on reload. */
export class DataFileError extends FairvisorError {
  constructor(message: string) {
    super('FV_DATA_FILE_INVALID', message)
    this.name = 'DataFileError'
  }
}

/** A bundle (or its signing key) that cannot be read at all: missing file, ambiguous directory, short key. */
export class BundleError extends FairvisorError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('FV_BUNDLE_UNREADABLE', message, options)
    this.name = 'BundleError'
  }
}

type StoreCode = 'FV_STORE_UNAVAILABLE' | 'FV_STORE_TIMEOUT' | 'FV_STORE_PROTOCOL'

/**
 * Thrown by a store only when its backend is broken (never for "over limit");
 * the engine answers it by the fail policy. Store code throws one of the
 * three subclasses below, so a caller tells them apart by class or code.
 */
export abstract class StoreError extends FairvisorError {
  constructor(message: string, code: StoreCode, options?: { cause?: unknown }) {
    super(code, message, options)
    this.name = 'StoreError'
  }
}

/** The backend did not answer within the store's deadline. */
export class StoreTimeoutError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 'FV_STORE_TIMEOUT', options)
    this.name = 'StoreTimeoutError'
  }
}

/** No connection to the backend (refused, lost, not ready) or the backend answered with an error. */
export class StoreUnavailableError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 'FV_STORE_UNAVAILABLE', options)
    this.name = 'StoreUnavailableError'
  }
}

/** The backend answered something the gateway's scripts never return (wrong length, wrong type). */
export class StoreProtocolError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 'FV_STORE_PROTOCOL', options)
    this.name = 'StoreProtocolError'
  }
}

/**
 * Upstream side of the reverse proxy: the reason an upstream call is aborted
 * by the gateway. undici reports the upstream's own failures with its coded
 * errors (UND_ERR_*), which the proxy maps by code to 502/504.
 */
export class ClientClosedError extends FairvisorError {
  constructor() {
    super('FV_CLIENT_CLOSED', 'client closed the connection')
    this.name = 'ClientClosedError'
  }
}

/** The gateway ended an LLM stream at max_completion_tokens and drops the upstream call (expected, not a failure). */
export class StreamCutError extends FairvisorError {
  constructor() {
    super('FV_LLM_STREAM_CUT', 'stream ended at max_completion_tokens')
    this.name = 'StreamCutError'
  }
}

/**
 * A request that carries an input a limit key reads in conflicting forms: a keyed header or
 * query parameter repeated with different values, or more than one credential. The gateway
 * cannot know which one the backend reads, so it cannot count the request on the right key;
 * it is refused `400 ambiguous_request` (docs/behaviour.md §3). Thrown by the view's key
 * readers, which only a malformed request makes throw, so the hot path pays nothing for it.
 */
export class AmbiguousRequest extends FairvisorError {
  constructor(message: string) {
    // No stack: it would only point into the gateway, and capturing one made a refused request
    // cost ≈ 7 µs instead of ≈ 2 µs (a client can send them as fast as any other).
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super('FV_REQUEST_AMBIGUOUS', message)
    Error.stackTraceLimit = limit
    this.name = 'AmbiguousRequest'
  }
}

/** A gRPC request that does not describe what the service needs; answered INVALID_ARGUMENT. */
export class InvalidGrpcRequest extends FairvisorError {
  constructor(message: string) {
    super('FV_GRPC_INVALID_REQUEST', message)
    this.name = 'InvalidGrpcRequest'
  }
}

/** A gRPC service the gateway serves is missing from the shipped proto files (a broken install). */
export class GrpcServiceMissing extends FairvisorError {
  constructor(service: string) {
    super('FV_GRPC_SERVICE_MISSING', `gRPC service ${service} is missing from proto/`)
    this.name = 'GrpcServiceMissing'
  }
}

/** An envoyproxy/ratelimit YAML configuration that does not parse or breaks its rules. */
export class RlsConfigError extends FairvisorError {
  constructor(message: string) {
    super('FV_RLS_CONFIG_INVALID', message)
    this.name = 'RlsConfigError'
  }
}

/**
 * What the admin API answers a request it does not serve (docs/admin.md): the HTTP status of each
 * code. The body is `{"error":{"code":"<code>","message":"…"}}`; the code is what a client branches on.
 */
export const ADMIN_ERRORS = {
  /** Missing or wrong bearer token; the answer says nothing else. */
  admin_unauthorized: 401,
  /** FAIRVISOR_ADMIN_TOKEN is not set: the admin API is off. */
  admin_disabled: 404,
  /** No admin route at this path. */
  admin_not_found: 404,
  admin_method_not_allowed: 405,
  /** A query parameter missing or malformed. */
  admin_bad_request: 400,
  /** No such policy, or no such rule in it, in the bundle in force. */
  admin_unknown_rule: 404,
  /** A credential's hashed form that names no key the gateway saw rejected lately: pass the credential itself. */
  admin_unknown_key: 404,
  /** The store failed to read or reset the counter (the message says how). */
  admin_store_failed: 503,
  /** The store in use cannot reset counters. */
  admin_reset_unsupported: 501,
  /** Anything else that kept the gateway from answering (the message says what). */
  admin_failed: 500,
} as const

export type AdminErrorCode = keyof typeof ADMIN_ERRORS

/** An admin API request refused: its code (ADMIN_ERRORS, with its HTTP status) and a sentence for the operator. */
export class AdminRequestError extends FairvisorError {
  readonly status: number
  constructor(
    readonly adminCode: AdminErrorCode,
    message: string,
  ) {
    super('FV_ADMIN_REQUEST', message)
    this.status = ADMIN_ERRORS[adminCode]
    this.name = 'AdminRequestError'
  }
}

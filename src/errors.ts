/**
 * One catalogue of coded errors. Codes are stable strings operators can grep
 * for in logs; messages are sentences. Bundle problems are not thrown: they
 * are reported as issues with a file and a JSON pointer (bundle/validate.ts)
 * and counted by reload result.
 */
export type ErrorCode =
  | 'FV_SETTING_INVALID'
  | 'FV_STORE_UNAVAILABLE'
  | 'FV_STORE_TIMEOUT'

export class FairvisorError extends Error {
  readonly code: ErrorCode
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.code = code
    this.name = 'FairvisorError'
  }
}

/** Thrown by a store only when its backend is broken (never for "over limit"). */
export class StoreError extends FairvisorError {
  constructor(message: string, code: 'FV_STORE_UNAVAILABLE' | 'FV_STORE_TIMEOUT' = 'FV_STORE_UNAVAILABLE', options?: { cause?: unknown }) {
    super(code, message, options)
    this.name = 'StoreError'
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

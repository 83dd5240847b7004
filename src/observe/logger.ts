/** pino JSON logs to stdout. One logger per process; modules take children. */
import { pino, type Logger } from 'pino'
import type { LogLevel } from '../settings.js'

export type { Logger }

export function createLogger(level: LogLevel): Logger {
  return pino({
    level,
    base: { service: 'fairvisor' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  })
}

/** pino JSON logs to stdout. One logger per process; modules take children. */
import { destination, pino, type Logger } from 'pino'
import type { LogLevel } from '../settings.js'

export type { Logger }

export function createLogger(level: LogLevel): Logger {
  return pino(
    {
      level,
      base: { service: 'fairvisor' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    // Asynchronous writes: a slow reader of stdout (a log shipper, a full pipe)
    // must never stall request handling, as a synchronous write would. pino
    // flushes what is buffered when the process exits.
    destination({ dest: 1, sync: false }),
  )
}

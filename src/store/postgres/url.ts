/**
 * FAIRVISOR_STORE → where PostgreSQL is. Forms (libpq URIs, read by `pg`):
 *   postgres://[user[:password]@]host[:port]/database[?sslmode=…]
 *   postgresql://…                                  the same
 *   postgres:///database?host=/run/postgresql&user=u  Unix socket directory
 * The password comes from the URL or, when the URL has none, from PGPASSWORD
 * (pg reads it). TLS by `sslmode`: disable, prefer, require, verify-ca,
 * verify-full (pg 8 checks the certificate for all but disable and
 * no-verify; `uselibpqcompat=true` gives libpq's weaker meaning of require).
 * A malformed value throws a SettingError naming FAIRVISOR_STORE, so start-up
 * stops before any connection is tried.
 */
import type { Attributes } from '@opentelemetry/api'
import {
  ATTR_DB_NAMESPACE,
  ATTR_DB_OPERATION_NAME,
  ATTR_DB_STORED_PROCEDURE_NAME,
  ATTR_DB_SYSTEM_NAME,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
} from '@opentelemetry/semantic-conventions'
import { SettingError } from '../../errors.js'

const SSLMODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify']

export interface PostgresTarget {
  /** The URL as given: pg parses it (host, port, user, password, database, sslmode, sslrootcert, …). */
  connectionString: string
  /** host:port/database without credentials, for logs. */
  display: string
}

export const isPostgresUrl = (raw: string): boolean => /^postgres(ql)?:\/\//.test(raw)

function bad(raw: string, why: string): SettingError {
  // Never echo a password into logs or the terminal.
  return new SettingError('FAIRVISOR_STORE', `"${raw.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@')}" ${why}`)
}

export function parsePostgresUrl(raw: string): PostgresTarget {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw bad(raw, 'is not a URL; use postgres://user[:password]@host[:port]/database[?sslmode=require]')
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') throw bad(raw, 'must use postgres:// or postgresql://')
  const socketDir = url.searchParams.get('host')
  if (!url.hostname && !socketDir) throw bad(raw, 'names no host; use postgres://user@host:5432/database or ?host=/socket/dir')
  if (url.port !== '' && !(Number(url.port) >= 1 && Number(url.port) <= 65535))
    throw bad(raw, `has a bad port "${url.port}"; use 1 to 65535`)
  const database = decodeURIComponent(url.pathname.replace(/^\//, ''))
  if (database === '' || database.includes('/')) throw bad(raw, 'names no database; use postgres://host:5432/<database>')
  const sslmode = url.searchParams.get('sslmode')
  if (sslmode !== null && !SSLMODES.includes(sslmode)) throw bad(raw, `has a bad sslmode "${sslmode}"; use one of ${SSLMODES.join(', ')}`)
  const host = url.hostname || socketDir!
  return { connectionString: raw, display: `${host}${url.port ? `:${url.port}` : ''}/${database}` }
}

/** A traced statement's attributes (database semantic conventions): the server and database of `display`, the function called. */
export function postgresSpanAttributes(target: PostgresTarget, fn: string): Attributes {
  const slash = target.display.lastIndexOf('/')
  const where = target.display.slice(0, slash)
  const colon = where.lastIndexOf(':')
  const port = colon === -1 || where.endsWith(']') ? undefined : Number(where.slice(colon + 1))
  return {
    [ATTR_DB_SYSTEM_NAME]: 'postgresql',
    [ATTR_DB_NAMESPACE]: target.display.slice(slash + 1),
    [ATTR_DB_OPERATION_NAME]: 'SELECT',
    [ATTR_DB_STORED_PROCEDURE_NAME]: fn,
    [ATTR_SERVER_ADDRESS]: port === undefined ? where : where.slice(0, colon),
    ...(port === undefined ? {} : { [ATTR_SERVER_PORT]: port }),
  }
}

/** A private CA made with openssl for TLS tests, and certificates it signs (EC P-256 keys: fast to make). */
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface TestCa {
  /** The CA certificate (PEM file). */
  ca: string
  /**
   * A certificate for `san` (e.g. `IP:127.0.0.1,DNS:localhost`) signed by the CA, as `<name>.pem`, with
   * its key `<name>.key`; `keyOf` reuses the key (and CSR) of an earlier certificate of that name.
   */
  issue(name: string, san: string, keyOf?: string): { cert: string; key: string }
}

export function testCa(dir: string): TestCa {
  const ssl = (...args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  ssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=fairvisor-test-ca')
  let serial = 0
  return {
    ca: join(dir, 'ca.pem'),
    issue(name, san, keyOf) {
      const base = keyOf ?? name
      if (keyOf === undefined) ssl('req', ...ec, '-keyout', `${base}.key`, '-out', `${base}.csr`, '-subj', `/CN=${name}`)
      writeFileSync(join(dir, `${name}.cnf`), `subjectAltName=${san}\n`)
      const ca = ['-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', String(++serial), '-days', '2']
      ssl('x509', '-req', '-in', `${base}.csr`, ...ca, '-extfile', `${name}.cnf`, '-out', `${name}.pem`)
      return { cert: join(dir, `${name}.pem`), key: join(dir, `${base}.key`) }
    },
  }
}

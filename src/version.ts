/** The package version, read once (build_info metric, CLI --version, start-up log). */
import { readFileSync } from 'node:fs'

const pkgUrl = new URL('../package.json', import.meta.url)
export const VERSION: string = (JSON.parse(readFileSync(pkgUrl, 'utf8')) as { version: string }).version

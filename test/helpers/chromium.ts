/**
 * Headless Chromium for browser tests: Debian's `chromium` driven by
 * puppeteer-core (no browser download). Tests skip, loudly, when it is not
 * installed (.ci/run installs it).
 */
import { existsSync } from 'node:fs'
import puppeteer, { type Browser } from 'puppeteer-core'

export const CHROMIUM = '/usr/bin/chromium'
export const HAVE_CHROMIUM = existsSync(CHROMIUM)

/** A headless browser; `--no-sandbox` because tests may run as root, where Chromium's sandbox refuses to start. */
export function launchChromium(): Promise<Browser> {
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check'],
  })
}

/** Configuration blocks of docs/integrations.md, the page operators copy them from, for the tests that run or check them. */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ROOT } from './processes.js'

/** The ```<lang> block between `<!-- <marker>:begin -->` and `<!-- <marker>:end -->` of docs/integrations.md, or undefined. */
export function docsBlock(marker: string, lang: string): string | undefined {
  const page = readFileSync(join(ROOT, 'docs', 'integrations.md'), 'utf8')
  return new RegExp(`<!-- ${marker}:begin -->\\s*\`\`\`${lang}\\n([\\s\\S]*?)\`\`\`\\s*<!-- ${marker}:end -->`).exec(page)?.[1]
}

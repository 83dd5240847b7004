/**
 * `fairvisor init [--template api|llm|webhook|budget|agent] [--out file] [--force]`: write a
 * starter bundle to stdout or a file. JSON has no comments, so the
 * explanations sit in "_comment" keys: unknown keys are ignored by the
 * gateway at every level used here (never inside `match`, whose keys are
 * descriptors). Each template passes `fairvisor validate`.
 */
import { writeFileSync } from 'node:fs'
import { parseArgs, UsageError } from './args.js'
import { TEMPLATES } from './init-templates.js'

const USAGE = `usage: fairvisor init [--template ${Object.keys(TEMPLATES).join('|')}] [--out file] [--force]`

export async function run(args: string[]): Promise<number> {
  let template: string, out: string | undefined, force: boolean
  try {
    const a = parseArgs(args, ['template', 'out'], ['force'])
    if (a.positional.length) throw new UsageError(`unexpected argument ${a.positional[0]}`)
    template = a.options.get('template') ?? 'api'
    if (!(template in TEMPLATES)) throw new UsageError(`--template must be one of ${Object.keys(TEMPLATES).join(', ')}, not "${template}"`)
    out = a.options.get('out')
    force = a.flags.has('force')
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`fairvisor init: ${err.message}\n${USAGE}\n`)
    return 2
  }
  const text = `${JSON.stringify(TEMPLATES[template]!(), null, 2)}\n`
  if (out === undefined || out === '-') {
    process.stdout.write(text)
    return 0
  }
  try {
    writeFileSync(out, text, { flag: force ? 'w' : 'wx' })
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    process.stderr.write(
      `fairvisor init: cannot write ${out} (${code === 'EEXIST' ? 'it exists; add --force to overwrite' : (code ?? (err as Error).message)})\n`,
    )
    return 1
  }
  process.stderr.write(`wrote ${out} (template ${template}); next: fairvisor validate ${out}\n`)
  return 0
}

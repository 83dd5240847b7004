/**
 * Tiny argv parser shared by the sub-commands: positional arguments and
 * `--name value` / `--name=value` options, every option named up front so a
 * typo is an error instead of being ignored.
 */
export class UsageError extends Error {}

export interface Parsed {
  positional: string[]
  options: Map<string, string>
  flags: Set<string>
}

export function parseArgs(args: string[], valued: readonly string[], flags: readonly string[] = []): Parsed {
  const out: Parsed = { positional: [], options: new Map(), flags: new Set() }
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    if (a === '-' || !a.startsWith('-')) {
      out.positional.push(a)
      continue
    }
    const eq = a.indexOf('=')
    const name = (eq === -1 ? a : a.slice(0, eq)).replace(/^--?/, '')
    if (flags.includes(name) && eq === -1) {
      out.flags.add(name)
      continue
    }
    if (!valued.includes(name)) throw new UsageError(`unknown option ${a}`)
    const value = eq === -1 ? args[++i] : a.slice(eq + 1)
    if (value === undefined) throw new UsageError(`option --${name} needs a value`)
    out.options.set(name, value)
  }
  return out
}

/** Read a whole file, or standard input for `-`. */
export async function readInput(path: string): Promise<Buffer> {
  if (path !== '-') {
    const { readFile } = await import('node:fs/promises')
    return readFile(path)
  }
  const chunks: Buffer[] = []
  for await (const c of process.stdin) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

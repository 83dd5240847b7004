/** The algorithms a bundle rule may name, by name. A rule whose algorithm is not here is skipped at load with a warning. */
import type { Algorithm } from './algorithm.js'
import { TOKEN_BUCKET } from './token-bucket.js'

export const ALGORITHMS: ReadonlyMap<string, Algorithm> = new Map<string, Algorithm>([[TOKEN_BUCKET.name, TOKEN_BUCKET as Algorithm]])

/**
 * The bundle JSON Schema as the gateway enforces it, and its compiled ajv
 * validator. The file on disk holds everything but the algorithms; the
 * ALGORITHMS table completes it, so an algorithm registered at run time is
 * validated like a built-in one.
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { ValidateFunction } from 'ajv'
import { CIRCUIT_BREAKER } from '../algorithms/circuit-breaker.js'
import { ALGORITHMS, algorithmsRevision } from '../algorithms/index.js'
import { LOOP_DETECTION } from '../algorithms/loop-detection.js'

const require = createRequire(import.meta.url)
let validator: ValidateFunction | undefined
let validatorRevision = -1

interface SchemaDoc {
  $defs: Record<string, Record<string, unknown>>
}

/**
 * schemas/bundle.schema.json (everything but the algorithms) completed from
 * the ALGORITHMS table: the rule's algorithm enum, one if/then branch per
 * algorithm pointing at its configSchema (under $defs, by algorithm name),
 * and the guards' configs.
 */
export function bundleSchema(): object {
  const schema = JSON.parse(readFileSync(new URL('../../schemas/bundle.schema.json', import.meta.url), 'utf8')) as SchemaDoc
  const defs = schema.$defs
  const rule = defs.ruleBody!
  ;(rule.properties as Record<string, unknown>).algorithm = { enum: [...ALGORITHMS.keys()] }
  rule.allOf = [...ALGORITHMS.values()].map((a) => ({
    if: { required: ['algorithm'], properties: { algorithm: { const: a.name } } },
    then: { properties: { algorithm_config: { $ref: `#/$defs/${a.name}` } } },
  }))
  for (const a of ALGORITHMS.values()) defs[a.name] = a.configSchema as Record<string, unknown>
  defs.loopDetection = LOOP_DETECTION.configSchema as Record<string, unknown>
  defs.circuitBreaker = CIRCUIT_BREAKER.configSchema as Record<string, unknown>
  return schema
}

/** The ajv validator, compiled on first use and kept until the algorithm table changes. */
export function schemaValidator(): ValidateFunction {
  if (validator && validatorRevision === algorithmsRevision()) return validator
  const Ajv2020 = require('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js').default
  const ajv = new Ajv2020({ allErrors: true, strict: false, verbose: true })
  validatorRevision = algorithmsRevision()
  validator = ajv.compile(bundleSchema())
  return validator
}

/**
 * What an LLM call through the gateway was settled at: the change of a policy's
 * fairvisor_tokens_consumed_total across the call, read once the settlement lands.
 */
import { metricValue, type GatewayProcess } from './processes.js'
import { waitFor } from './wait.js'

export async function consumed(gw: GatewayProcess, policy: string): Promise<number> {
  return (await metricValue(gw, 'fairvisor_tokens_consumed_total', `policy="${policy}"`)) ?? 0
}

/** Runs `call`, then waits for the policy's consumed-tokens counter to move (the settlement) and returns by how much. */
export async function settled<T>(gw: GatewayProcess, policy: string, call: () => Promise<T>): Promise<{ result: T; used: number }> {
  const before = await consumed(gw, policy)
  const result = await call()
  let now = before
  await waitFor(async () => (now = await consumed(gw, policy)) !== before, `a settlement for ${policy}`)
  return { result, used: now - before }
}

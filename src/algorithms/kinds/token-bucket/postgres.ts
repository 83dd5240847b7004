/**
 * The token bucket in PL/pgSQL (kind.ts's twin; the contract: ../twins.ts):
 * rate p1, burst p2, longest wait p3 in seconds (the debt allowed is p3 ×
 * rate; 0 without); state tokens (0), last refill (1), elapsed time
 * rounded to the microsecond as kind.ts does.
 */
import { EPSILON } from '../../algorithm.js'
import type { KindSql } from '../twins.js'

/** Refilled to now: tokens in a0, time in a1 (an absent bucket is full). */
const refill = (p: string): string => `
  IF here THEN a0 := least(p2, ${p}snap(a0 + greatest(0, round((now - a1) * 1e6) / 1e6) * p1)); a1 := greatest(a1, now);
  ELSE a0 := p2; a1 := now; END IF;`

export const SQL: KindSql = {
  take: (p) => `${refill(p)}
  ok := cost <= p2 AND a0 + p1 * p3 >= cost;
  IF ok THEN n0 := ${p}snap(a0 - cost); n1 := a1; n2 := 0; n3 := 0; nx := a1 + greatest(0, (p2 - n0) / p1); val := n0;
  ELSE val := a0; retry := greatest(1, ceil((cost - a0 - p1 * p3) / p1 - ${EPSILON})); END IF;`,
  // Give back (never past burst) or charge (may go below zero); an absent bucket has nothing to give back.
  adjust: (p) => `
  IF NOT here AND amount >= 0 THEN ok := false;
  ELSE ${refill(p)}
    n0 := least(p2, ${p}snap(a0 + amount)); n1 := a1; n2 := 0; n3 := 0; nx := a1 + greatest(0, (p2 - n0) / p1);
  END IF;`,
}

/**
 * The window counter in PL/pgSQL (kind.ts's twin; the contract: ../twins.ts):
 * limit p1, window p2, origin p3; state count (0), window start (1).
 */
import { EPSILON } from '../../algorithm.js'
import type { KindSql } from '../twins.js'

/** The window `now` falls in (start in n1) and the count carried into it (a0). */
const WINDOW = `
  IF p3 >= 0 THEN n1 := floor((now - p3) / p2) * p2 + p3; IF NOT here OR a1 <> n1 THEN a0 := 0; END IF;
  ELSIF here AND now < a1 + p2 THEN n1 := a1;
  ELSE a0 := 0; n1 := now; END IF;`

export const SQL: KindSql = {
  take: () => `${WINDOW}
  nx := n1 + p2; retry := greatest(1, ceil(nx - now - ${EPSILON}));
  ok := a0 + cost <= p1 + ${EPSILON};
  IF ok THEN n0 := a0 + cost; n2 := 0; n3 := 0; val := n0; ELSE val := a0; END IF;`,
  // The current window's count, never below zero; nothing charged in it: nothing to give back.
  adjust: () => `${WINDOW}
  IF a0 = 0 AND amount >= 0 THEN ok := false; ELSE n0 := greatest(0, a0 - amount); n2 := 0; n3 := 0; nx := n1 + p2; END IF;`,
}

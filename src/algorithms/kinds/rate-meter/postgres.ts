/**
 * The rate meter in PL/pgSQL (kind.ts's twin; the contract: ../twins.ts):
 * threshold p1, open p2; state prev (0), cur (1), minute (2), open until (3).
 */
import { EPSILON } from '../../algorithm.js'
import type { KindSql } from '../twins.js'

export const SQL: KindSql = {
  take: () => `
  IF here AND a3 > now THEN ok := false; val := p1; retry := greatest(1, ceil(a3 - now - ${EPSILON}));
  ELSE
    n2 := floor(now / 60) * 60;
    -- A stored minute after now's is the current one (kind.ts): a clock behind never resets the spend.
    IF here AND a2 >= n2 THEN n0 := a0; n1 := a1; n2 := a2; ELSIF here AND a2 = n2 - 60 THEN n0 := a1; n1 := 0; ELSE n0 := 0; n1 := 0; END IF;
    val := n0 * (1 - greatest(0, now - n2) / 60) + n1 + cost;
    ok := val < p1 - ${EPSILON};
    IF ok THEN n1 := n1 + cost; n3 := 0; nx := n2 + 120;
    ELSE n0 := 0; n1 := 0; n3 := now + p2; nx := greatest(n3, n2 + 120); keep := true; retry := greatest(1, ceil(p2 - ${EPSILON})); END IF;
  END IF;`,
  // Spend of the current minute only (or of a stored minute after now's).
  adjust: () => `
  IF NOT here OR a2 < floor(now / 60) * 60 THEN ok := false;
  ELSE n0 := a0; n1 := greatest(0, a1 - amount); n2 := a2; n3 := a3; nx := greatest(a3, a2 + 120); END IF;`,
}

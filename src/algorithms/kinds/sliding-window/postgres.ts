/**
 * The sliding window in PL/pgSQL (kind.ts's twin; the contract: ../twins.ts):
 * limit p1, window p2; state prev (0), cur (1), window start (2).
 */
import { EPSILON } from '../../algorithm.js'
import type { KindSql } from '../twins.js'

/** The window `now` falls in (start in n2) and the counts carried into it (n0 prev, n1 cur); a new one at `now` when nothing counts. */
const CURRENT = `
  IF here AND floor(greatest(0, now - a2) / p2) = 0 AND (a0 > 0 OR a1 > 0) THEN n0 := a0; n1 := a1; n2 := a2;
  ELSIF here AND floor(greatest(0, now - a2) / p2) = 1 AND a1 > 0 THEN n0 := a1; n1 := 0; n2 := a2 + p2;
  ELSE n0 := 0; n1 := 0; n2 := now; END IF;
  n3 := 0;`

/** The estimate at now of the counts in n0, n1. */
const estimate = (p: string): string => `${p}snap(n0 * (1 - greatest(0, now - n2) / p2) + n1)`

/** Whole seconds (at least 1) until, with no more requests, the estimate of n0..n2 is down to x (kind.ts, fitsAt). */
const WAIT = `greatest(1, ceil(CASE WHEN n1 <= greatest(0, x) THEN CASE WHEN n0 > 0 THEN n2 + p2 * (1 - (greatest(0, x) - n1) / n0) ELSE now END
    ELSE n2 + 2 * p2 - p2 * greatest(0, x) / n1 END - now - ${EPSILON}))`

/** Kept until both counts are out of the window. */
const EXPIRY = 'nx := CASE WHEN n1 > 0 THEN n2 + 2 * p2 WHEN n0 > 0 THEN n2 + p2 ELSE n2 END;'

export const SQL: KindSql = {
  take: (p) => `${CURRENT}
  DECLARE est float8 := ${estimate(p)}; x float8;
  BEGIN
    ok := est + cost <= p1 + ${EPSILON};
    IF ok THEN
      n1 := n1 + cost; val := ${p}snap(p1 - est - cost); ${EXPIRY}
      IF val + ${EPSILON} < 1 THEN x := p1 - 1; retry := ${WAIT}; END IF;
    ELSE
      val := ${p}snap(p1 - est); x := p1 - cost; retry := ${WAIT};
    END IF;
  END;`,
  // Give back from the current window's count, the rest from the previous one's; nothing counted: nothing to give back.
  adjust: () => `${CURRENT}
  IF amount >= 0 AND n0 = 0 AND n1 = 0 THEN ok := false;
  ELSE
    n1 := n1 - amount;
    IF n1 < 0 THEN n0 := greatest(0, n0 + n1); n1 := 0; END IF;
    ${EXPIRY}
  END IF;`,
}

/**
 * The sliding window in PL/pgSQL (kind.ts's twin; the contract: ../twins.ts):
 * limit p1, window p2, longest hold p3 in seconds (0: none; in an adjustment,
 * below zero: a held request's give-back, kind.ts heldGiveBack); state prev
 * (0), cur (1), window start (2), counted for the next window (3).
 */
import { EPSILON } from '../../algorithm.js'
import type { KindSql } from '../twins.js'

/** The window `now` falls in (start in n2) and the counts carried into it (n0 prev, n1 cur, n3 next); a new one at `now` when nothing counts. */
const CURRENT = `
  IF here AND floor(greatest(0, now - a2) / p2) = 0 AND (a0 > 0 OR a1 > 0 OR a3 > 0) THEN n0 := a0; n1 := a1; n2 := a2; n3 := a3;
  ELSIF here AND floor(greatest(0, now - a2) / p2) = 1 AND (a1 > 0 OR a3 > 0) THEN n0 := a1; n1 := a3; n2 := a2 + p2; n3 := 0;
  ELSIF here AND floor(greatest(0, now - a2) / p2) = 2 AND a3 > 0 THEN n0 := a3; n1 := 0; n2 := a2 + 2 * p2; n3 := 0;
  ELSE n0 := 0; n1 := 0; n2 := now; n3 := 0; END IF;`

/** The estimate, e seconds into the window, of the counts in n0, n1, n3. */
const estimate = (p: string): string => `${p}snap(n0 * (1 - e / p2) + n1 + n3)`

/** fit := when (s after the window's start), with no more requests, the estimate of n0..n3 is down to x ≥ 0 (kind.ts, fitsAt). */
const FITS = `fit := CASE WHEN n1 + n3 <= x THEN CASE WHEN n0 > 0 THEN p2 * (1 - (x - n1 - n3) / n0) ELSE e END
    WHEN n3 <= x THEN 2 * p2 - p2 * (x - n3) / n1 ELSE 3 * p2 - p2 * x / n3 END;`

/** Whole seconds (at least 1) from e to `t`, both in the window. */
const secondsTo = (t: string): string => `greatest(1, ceil(${t} - e - ${EPSILON}))`

/** Kept until every count is out of the window. */
const EXPIRY = 'nx := CASE WHEN n3 > 0 THEN n2 + 3 * p2 WHEN n1 > 0 THEN n2 + 2 * p2 WHEN n0 > 0 THEN n2 + p2 ELSE n2 END;'

export const SQL: KindSql = {
  take: (p) => `${CURRENT}
  DECLARE e float8 := greatest(0, now - n2); est float8 := ${estimate(p)}; x float8; fit float8;
  BEGIN
    ok := est + cost <= p1 + ${EPSILON};
    IF ok THEN
      n1 := n1 + cost; val := ${p}snap(p1 - est - cost); ${EXPIRY}
      IF val + ${EPSILON} < 1 THEN x := greatest(0, p1 - 1); ${FITS} retry := ${secondsTo('fit')}; END IF;
    ELSE
      val := ${p}snap(p1 - est); x := greatest(0, p1 - cost); ${FITS}
      IF p3 <= 0 OR cost > p1 + ${EPSILON} THEN retry := ${secondsTo('fit')};
      ELSIF fit - e <= p3 AND fit < 2 * p2 THEN
        -- Held until fit, counted in the window it falls in.
        ok := true;
        IF fit < p2 THEN n1 := n1 + cost; ELSE n3 := n3 + cost; END IF;
        val := ${p}snap(p1 - est - cost); retry := greatest(0, fit - e); ${EXPIRY}
      ELSE retry := ${secondsTo('greatest(fit - p3, (floor(fit / p2) - 1) * p2)')};
      END IF;
    END IF;
  END;`,
  // Give back from the current window's count, then the previous one's, then the next one's; nothing counted: nothing to give back.
  // A held request's charge (p3: minus the seconds it still had to wait) from the next window's count first when counted there.
  adjust: () => `${CURRENT}
  IF amount >= 0 AND n0 = 0 AND n1 = 0 AND n3 = 0 THEN ok := false;
  ELSE
    IF amount > 0 AND p3 < 0 AND greatest(0, now - n2) - p3 >= p2 THEN
      DECLARE take float8 := least(n3, amount);
      BEGIN n3 := n3 - take; amount := amount - take; END;
    END IF;
    n1 := n1 - amount;
    IF n1 < 0 THEN
      n0 := n0 + n1; n1 := 0;
      IF n0 < 0 THEN n3 := greatest(0, n3 + n0); n0 := 0; END IF;
    END IF;
    ${EXPIRY}
  END IF;`,
}

/**
 * Concurrency slots in PL/pgSQL (kind.ts's twin; the contract: ../twins.ts):
 * max p1, lease seconds p2; state the newest lease bucket's index (0) and
 * the slots taken in it and the two before it (1, 2, 3).
 */
import { EPSILON } from '../../algorithm.js'
import type { KindSql } from '../twins.js'

/** The state at now: buckets that have passed shift out (n0 holds now's bucket meanwhile). */
const SHIFT = `
  n0 := floor(now * 3 / p2);
  IF NOT here THEN a0 := n0; a1 := 0; a2 := 0; a3 := 0;
  ELSIF n0 - a0 = 1 THEN a3 := a2; a2 := a1; a1 := 0; a0 := n0;
  ELSIF n0 - a0 = 2 THEN a3 := a1; a2 := 0; a1 := 0; a0 := n0;
  ELSIF n0 - a0 >= 3 THEN a1 := 0; a2 := 0; a3 := 0; a0 := n0;
  END IF;`

/** The new state n0..n3 is set: its expiry (now when no slot is taken). */
const EXPIRY = `
  nx := CASE WHEN n1 > 0 THEN n0 WHEN n2 > 0 THEN n0 - 1 WHEN n3 > 0 THEN n0 - 2 END;
  nx := CASE WHEN nx IS NULL THEN now ELSE (nx + 3 + 0.001) * p2 / 3 END;`

export const SQL: KindSql = {
  take: (p) => `${SHIFT}
  ok := a1 + a2 + a3 + cost <= p1 + ${EPSILON};
  IF ok THEN n0 := a0; n1 := ${p}snap(a1 + cost); n2 := a2; n3 := a3; ${EXPIRY}
    val := greatest(0, ${p}snap(p1 - (n1 + n2 + n3)));
  ELSE val := greatest(0, ${p}snap(p1 - (a1 + a2 + a3))); retry := 1; END IF;`,
  // Give back slots taken at \`at\` (from its bucket, then the newer one, then the older), or take more now.
  adjust: (p) => `
  IF NOT here AND amount >= 0 THEN ok := false;
  ELSE ${SHIFT}
    n0 := a0; n1 := a1; n2 := a2; n3 := a3;
    IF amount < 0 THEN n1 := ${p}snap(a1 - amount);
    ELSE
      DECLARE ci int := a0 - floor(at * 3 / p2); cj int; ct float8; crest float8 := amount; c float8[] := ARRAY[a1, a2, a3];
      BEGIN
        IF ci > 2 THEN ok := false;
        ELSE
          ci := greatest(ci, 0);
          FOREACH cj IN ARRAY ARRAY[ci, ci - 1, ci + 1] LOOP
            CONTINUE WHEN cj < 0 OR cj > 2;
            ct := least(crest, c[cj + 1]); c[cj + 1] := ${p}snap(c[cj + 1] - ct); crest := crest - ct;
          END LOOP;
          n1 := c[1]; n2 := c[2]; n3 := c[3];
        END IF;
      END;
    END IF;
    IF ok THEN ${EXPIRY} END IF;
  END IF;`,
}

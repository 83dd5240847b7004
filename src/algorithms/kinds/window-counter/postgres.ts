/**
 * The window counter in PL/pgSQL (kind.ts's twin; the contract: ../twins.ts):
 * limit p1, window p2 (−n: n calendar months), origin p3; state count (0),
 * window start (1). Calendar months from the database's own calendar, read
 * from the UTC day of `now` as kind.ts does.
 */
import { EPSILON } from '../../algorithm.js'
import type { KindSql } from '../twins.js'

/**
 * The window `now` falls in (start in n1, end in nx) and the count carried into it (a0). A stored
 * window that starts after `now` is the current one: a node or fail-over replica whose clock is
 * behind the one that wrote it must not reset its count (the comparisons never go backwards).
 */
const WINDOW = `
  IF p2 < 0 THEN
    DECLARE d date := date '1970-01-01' + floor(CASE WHEN here THEN greatest(now, a1) ELSE now END / 86400)::int; k int;
    BEGIN
      k := floor(((extract(year FROM d)::int - 1970) * 12 + extract(month FROM d)::int - 1) / -p2)::int * (-p2)::int;
      n1 := extract(epoch FROM timestamp '1970-01-01' + make_interval(months => k))::float8;
      nx := extract(epoch FROM timestamp '1970-01-01' + make_interval(months => k - p2::int))::float8;
    END;
    IF NOT here OR a1 <> n1 THEN a0 := 0; END IF;
  ELSIF p3 >= 0 THEN
    n1 := floor((now - p3) / p2) * p2 + p3; IF here AND a1 > now THEN n1 := a1; END IF;
    nx := n1 + p2; IF NOT here OR a1 <> n1 THEN a0 := 0; END IF;
  ELSIF here AND now < a1 + p2 THEN n1 := a1; nx := n1 + p2;
  ELSE a0 := 0; n1 := now; nx := n1 + p2; END IF;`

export const SQL: KindSql = {
  take: () => `${WINDOW}
  retry := greatest(1, ceil(nx - now - ${EPSILON}));
  ok := a0 + cost <= p1 + ${EPSILON};
  IF ok THEN n0 := a0 + cost; n2 := 0; n3 := 0; val := n0; ELSE val := a0; END IF;`,
  // The current window's count, never below zero; nothing charged in it: nothing to give back.
  adjust: () => `${WINDOW}
  IF a0 = 0 AND amount >= 0 THEN ok := false; ELSE n0 := greatest(0, a0 - amount); n2 := 0; n3 := 0; END IF;`,
}

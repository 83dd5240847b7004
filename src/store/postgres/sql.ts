/**
 * The PostgreSQL schema and functions: the take and adjust frames around the
 * limit kinds' PL/pgSQL twins (algorithms/kinds/<kind>/postgres.ts), run
 * inside the database so that all limits of a request are checked and
 * committed in one statement, on the server's clock (clock_timestamp(),
 * epoch seconds as float8: gateway clocks cannot skew a refill). The
 * functions are assembled from the kind table (algorithms/kinds/index.ts)
 * when a store opens, one branch per kind id, and installed with CREATE OR
 * REPLACE under the same signatures, so a gateway that knows more kinds
 * upgrades the functions of an existing deployment in place (schema.ts: only
 * when the installed version differs from these statements').
 *
 * One table, `<prefix>counters`: a row per counter key, the kind's state in
 * s0..s3 (each kind's twin says what they hold) and `expire_at` (epoch seconds): a row
 * whose expire_at has passed reads as absent, which is lossless (an absent
 * bucket is full), and the clean-up deletes it. No index on expire_at: every
 * request changes it, and without a second index the update stays HOT (no
 * index write); the clean-up's bounded scan does without. fillfactor leaves
 * page room for those HOT updates.
 *
 * `<prefix>take(keys, nums, reqs)` applies a batch of requests: `keys` the
 * distinct counter keys, `nums` 7 numbers per check (key index 1-based, kind,
 * p1, p2, p3, cost, group 0 enforce / 1 shadow plus 2 × ON_REJECT_MODE), `reqs`
 * the number of checks of each request. Requests are evaluated one after the
 * other, each all or nothing per group on its own (a reject never touches
 * another request of the batch). Reply: 3 numbers per check (status 1
 * allowed, 0 rejected, -1 not evaluated; value; retry-after seconds), and
 * for a request with a check carrying an OnReject mode, 3 more per check:
 * its read-back (store.ts OnReject; -1 where none), after its outcomes.
 *
 * `<prefix>adjust(keys, nums, ats)` applies adjustments one after the other:
 * 6 numbers each in `nums` (key index, kind, p1, p2, p3, amount) and, in
 * `ats`, when each adjusted charge was made (−1: now). Its two-argument
 * form, from versions that sent no times, is left in place: a gateway of
 * such a version still running beside this one (a rolling upgrade) keeps
 * calling the function it knows.
 *
 * Locking without deadlocks: `<prefix>lock` first inserts the rows that do
 * not exist yet (ON CONFLICT DO NOTHING, in key order: a key inserted by a
 * concurrent request is waited for, in order), then locks every row with
 * SELECT … ORDER BY key FOR UPDATE (LockRows sits above the sort, so rows are
 * locked in key order). Every request takes its locks in the same order, so
 * two requests naming the same keys in different orders queue, never cycle.
 * (YugabyteDB sends row locks in batches, in no set order, unless the session
 * sets yb_explicit_row_locking_batch_size to 1: conn.ts does so there.)
 * Under READ COMMITTED each statement sees the latest committed rows, and
 * FOR UPDATE re-reads a row updated meanwhile. A row the clean-up deleted
 * between the two statements comes back absent and is re-inserted on write.
 *
 * Float noise is handled as in the TS kinds: token counts within EPSILON of a
 * whole number snap to it, waits subtract EPSILON before rounding up, elapsed
 * time is rounded to the microsecond. A stored state is kept at least 1 s
 * (as Redis' PSETEX floor), so a fresh write never reads as already expired.
 */
import { EPSILON } from '../../algorithms/algorithm.js'
import { KINDS } from '../../algorithms/kinds/index.js'

/** Numbers per check in `take`'s `nums`. */
const TAKE_NUMS = 7
/** Numbers per check in `take`'s reply. */
export const TAKE_REPLY = 3
/** Numbers per adjustment in `adjust`'s `nums`: key index, kind, p1, p2, p3, amount (its time apart, in `ats`). */
const ADJUST_NUMS = 6

/** nums' group values past 1 carry a check's OnReject (store.ts) as group + 2 × mode. */
export const ON_REJECT_MODE = { read: 1, charge: 2, over: 3 } as const

/** A prefix is spliced into identifiers: only these characters (settings validate it). */
export const PREFIX_RE = /^[a-z_][a-z0-9_]{0,40}$/

/**
 * The schema, one statement per entry (without a trailing semicolon): the table, then the
 * functions. Set up by schema.ts, which records their version with them.
 */
export function schemaStatements(prefix: string, unlogged: boolean): string[] {
  const p = prefix
  return [
    `CREATE ${unlogged ? 'UNLOGGED ' : ''}TABLE IF NOT EXISTS ${p}counters (
  key text COLLATE "C" PRIMARY KEY,
  s0 float8 NOT NULL DEFAULT 0, s1 float8 NOT NULL DEFAULT 0, s2 float8 NOT NULL DEFAULT 0, s3 float8 NOT NULL DEFAULT 0,
  expire_at float8 NOT NULL DEFAULT 0
) WITH (fillfactor = 50)`,
    `CREATE OR REPLACE FUNCTION ${p}snap(x float8) RETURNS float8 LANGUAGE sql IMMUTABLE AS
$$ SELECT CASE WHEN abs(x - round(x)) < ${EPSILON} THEN round(x) ELSE x END $$`,
    `CREATE OR REPLACE FUNCTION ${p}lock(ks text[]) RETURNS TABLE (i int, s0 float8, s1 float8, s2 float8, s3 float8, ex float8) LANGUAGE sql AS $$
  INSERT INTO ${p}counters (key) SELECT k FROM unnest(ks) k ORDER BY k COLLATE "C" ON CONFLICT (key) DO NOTHING;
  SELECT u.i::int, c.s0, c.s1, c.s2, c.s3, c.expire_at FROM unnest(ks) WITH ORDINALITY u(k, i)
    JOIN ${p}counters c ON c.key = u.k ORDER BY c.key FOR UPDATE OF c;
$$`,
    `CREATE OR REPLACE FUNCTION ${p}save(ks text[], d bool[], a float8[], b float8[], c float8[], e float8[], x float8[]) RETURNS void LANGUAGE sql AS $$
  INSERT INTO ${p}counters AS t (key, s0, s1, s2, s3, expire_at)
    SELECT u.k, u.s0, u.s1, u.s2, u.s3, u.ex FROM unnest(ks, d, a, b, c, e, x) u(k, dirty, s0, s1, s2, s3, ex) WHERE u.dirty ORDER BY u.k COLLATE "C"
  ON CONFLICT (key) DO UPDATE SET s0 = excluded.s0, s1 = excluded.s1, s2 = excluded.s2, s3 = excluded.s3, expire_at = excluded.expire_at;
$$`,
    takeSql(p),
    adjustSql(p),
  ]
}

/** The schema as one script (tests that install the functions by hand). */
export const schemaSql = (prefix: string, unlogged: boolean): string => `${schemaStatements(prefix, unlogged).join(';\n')};\n`

/** Declarations and state loading shared by take and adjust: c0..c3/cx are the committed state per key index. */
const LOAD = `
  nk int := coalesce(array_length(ks, 1), 0);
  now float8 := extract(epoch FROM clock_timestamp())::float8;
  c0 float8[] := array_fill(0::float8, ARRAY[nk]); c1 float8[] := c0; c2 float8[] := c0; c3 float8[] := c0; cx float8[] := c0;
  dirty bool[] := array_fill(false, ARRAY[nk]);
  r record; k int; kind int; p1 float8; p2 float8; p3 float8; cost float8; here bool; at float8 := now;
  a0 float8; a1 float8; a2 float8; a3 float8; n0 float8; n1 float8; n2 float8; n3 float8; nx float8;`

const LOCK = (p: string): string => `
  FOR r IN SELECT * FROM ${p}lock(ks) LOOP
    c0[r.i] := r.s0; c1[r.i] := r.s1; c2[r.i] := r.s2; c3[r.i] := r.s3; cx[r.i] := r.ex;
  END LOOP;`

const SAVE = (p: string): string => `
  IF true = ANY(dirty) THEN PERFORM ${p}save(ks, dirty, c0, c1, c2, c3, cx); END IF;`

/** `IF kind = <id> THEN <the kind's statements> ELSIF …` over the kind table (also test/property/kind-twins.test.ts's). */
export function dispatch(part: 'take' | 'adjust', p: string): string {
  let out = ''
  for (const [id, kind] of KINDS) out += `${out === '' ? 'IF' : 'ELSIF'} kind = ${id} THEN -- ${kind.name}${kind.sql[part](p)}\n      `
  return `${out}ELSE RAISE EXCEPTION 'unknown limit kind %', kind;
      END IF;`
}

/** Check j's key index, kind, parameters and its key's committed state (for the read-backs). */
const CHECK_J = `
        o := (j - 1) * ${TAKE_NUMS}; k := nums[o + 1]::int; kind := nums[o + 2]::int; p1 := nums[o + 3]; p2 := nums[o + 4]; p3 := nums[o + 5];
        a0 := c0[k]; a1 := c1[k]; a2 := c2[k]; a3 := c3[k]; here := cx[k] > now; keep := false; retry := 0;`

/** Check j read back (a step of cost 0 on its committed state, nothing written) into its read-back slot. */
const READ_J = (p: string): string => `${CHECK_J} cost := 0;
        ${dispatch('take', p)}
        res[rb + (j - lo) * 3 + 1] := CASE WHEN ok THEN 1 ELSE 0 END; res[rb + (j - lo) * 3 + 2] := val; res[rb + (j - lo) * 3 + 3] := retry;`

/**
 * The read-backs of request q's rejected groups (store.ts OnReject): which checks are charged is
 * decided on the counters as the request left them (mode 3, over: its cost alone is rejected),
 * then they are charged by their kind's adjust in order, then read again.
 */
const READ_BACK = (p: string): string => `
    IF fls[q] AND (rej[1] OR rej[2]) THEN
      rb := base + reqs[q] * 3; ch := '{}';
      FOR j IN lo .. hi LOOP
        m := nums[(j - 1) * ${TAKE_NUMS} + 7]::int;
        CONTINUE WHEN m < 2 OR NOT rej[m % 2 + 1];
        m := m / 2; ${CHECK_J} cost := nums[o + 6];
        ${dispatch('take', p)}
        IF m = 2 OR (m = 3 AND NOT ok) THEN ch := ch || j; ELSE ${READ_J(p)} END IF;
      END LOOP;
      FOREACH j IN ARRAY ch LOOP ${CHECK_J} amount := -nums[o + 6]; ok := true;
        ${dispatch('adjust', p)}
        IF ok THEN c0[k] := n0; c1[k] := n1; c2[k] := n2; c3[k] := n3; cx[k] := greatest(nx, now + 1); dirty[k] := true; END IF;
      END LOOP;
      FOREACH j IN ARRAY ch LOOP ${READ_J(p)}
      END LOOP;
    END IF;`

function takeSql(p: string): string {
  return `CREATE OR REPLACE FUNCTION ${p}take(ks text[], nums float8[], reqs int[]) RETURNS float8[] LANGUAGE plpgsql AS $f$
DECLARE ${LOAD}
  n int := coalesce(array_length(nums, 1), 0) / ${TAKE_NUMS};
  nq int := coalesce(array_length(reqs, 1), 0);
  res float8[];
  -- Per request: whether a check of it asks for read-backs; its reply's offset (base) and its read-backs' (rb).
  fls bool[] := array_fill(false, ARRAY[nq]); base int := 0; rb int; m int; ch int[]; amount float8;
  -- Staged states of the current request: per key (t*, valid when tr[k] = request number) and per check (g*).
  t0 float8[] := c0; t1 float8[] := c0; t2 float8[] := c0; t3 float8[] := c0; tx float8[] := c0; tr int[] := array_fill(0, ARRAY[nk]);
  g0 float8[] := array_fill(0::float8, ARRAY[n]); g1 float8[] := g0; g2 float8[] := g0; g3 float8[] := g0; gx float8[] := g0;
  staged bool[] := array_fill(false, ARRAY[n]);
  lo int := 1; hi int; q int; j int; o int; grp int; rej bool[]; ok bool; val float8; retry float8; keep bool;
BEGIN ${LOCK(p)}
  FOR q IN 1 .. nq LOOP
    FOR j IN lo .. lo + reqs[q] - 1 LOOP fls[q] := fls[q] OR nums[j * ${TAKE_NUMS}] > 1; END LOOP;
    base := base + reqs[q] * CASE WHEN fls[q] THEN 6 ELSE 3 END; lo := lo + reqs[q];
  END LOOP;
  res := array_fill(-1::float8, ARRAY[base]); base := 0; lo := 1;
  FOR q IN 1 .. nq LOOP
    hi := lo + reqs[q] - 1;
    rej := ARRAY[false, false];
    FOR j IN lo .. hi LOOP
      o := (j - 1) * ${TAKE_NUMS};
      grp := nums[o + 7]::int % 2 + 1;
      CONTINUE WHEN rej[grp];
      k := nums[o + 1]::int; kind := nums[o + 2]::int; p1 := nums[o + 3]; p2 := nums[o + 4]; p3 := nums[o + 5]; cost := nums[o + 6];
      IF tr[k] = q THEN a0 := t0[k]; a1 := t1[k]; a2 := t2[k]; a3 := t3[k]; here := true;
      ELSE a0 := c0[k]; a1 := c1[k]; a2 := c2[k]; a3 := c3[k]; here := cx[k] > now; END IF;
      keep := false; retry := 0;
      ${dispatch('take', p)}
      IF ok OR keep THEN nx := greatest(nx, now + 1); END IF;
      IF ok THEN
        t0[k] := n0; t1[k] := n1; t2[k] := n2; t3[k] := n3; tx[k] := nx; tr[k] := q;
        g0[j] := n0; g1[j] := n1; g2[j] := n2; g3[j] := n3; gx[j] := nx; staged[j] := true;
      ELSE
        rej[grp] := true;
        -- A breaker opening is committed although its group rejects.
        IF keep THEN c0[k] := n0; c1[k] := n1; c2[k] := n2; c3[k] := n3; cx[k] := nx; dirty[k] := true; END IF;
      END IF;
      res[base + (j - lo) * 3 + 1] := CASE WHEN ok THEN 1 ELSE 0 END; res[base + (j - lo) * 3 + 2] := val; res[base + (j - lo) * 3 + 3] := retry;
    END LOOP;
    FOR j IN lo .. hi LOOP
      CONTINUE WHEN NOT staged[j] OR rej[nums[(j - 1) * ${TAKE_NUMS} + 7]::int % 2 + 1];
      k := nums[(j - 1) * ${TAKE_NUMS} + 1]::int;
      c0[k] := g0[j]; c1[k] := g1[j]; c2[k] := g2[j]; c3[k] := g3[j]; cx[k] := gx[j]; dirty[k] := true;
    END LOOP; ${READ_BACK(p)}
    base := base + reqs[q] * CASE WHEN fls[q] THEN 6 ELSE 3 END;
    lo := hi + 1;
  END LOOP; ${SAVE(p)}
  RETURN res;
END $f$`
}

function adjustSql(p: string): string {
  return `CREATE OR REPLACE FUNCTION ${p}adjust(ks text[], nums float8[], ats float8[]) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE ${LOAD}
  o int; amount float8; ok bool;
BEGIN ${LOCK(p)}
  FOR o IN 0 .. coalesce(array_length(nums, 1), 0) - 1 BY ${ADJUST_NUMS} LOOP
    k := nums[o + 1]::int; kind := nums[o + 2]::int; p1 := nums[o + 3]; p2 := nums[o + 4]; p3 := nums[o + 5]; amount := nums[o + 6];
    at := CASE WHEN ats[o / ${ADJUST_NUMS} + 1] < 0 THEN now ELSE ats[o / ${ADJUST_NUMS} + 1] END;
    a0 := c0[k]; a1 := c1[k]; a2 := c2[k]; a3 := c3[k]; here := cx[k] > now; ok := true;
    ${dispatch('adjust', p)}
    IF ok THEN c0[k] := n0; c1[k] := n1; c2[k] := n2; c3[k] := n3; cx[k] := greatest(nx, now + 1); dirty[k] := true; END IF;
  END LOOP; ${SAVE(p)}
END $f$`
}

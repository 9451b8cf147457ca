-- Op share regressions: for each run, each op's share of the sampled step in the first half of
-- its captures against the second half (an op a capture did not sample counts 0 there); the
-- ops that gained 2 points or more, with the first captured step of the second half. Shares
-- are estimates from stack samples (ops.parquet); `series RUN_DIR` tests them with intervals.
-- The probe's own frames (the `(probe)` row) count in the step's total, never as a regression.
WITH per_step AS (
  SELECT run, CAST(step AS BIGINT) AS step, op, pass, SUM(samples) AS samples
  FROM ops
  WHERE op IS NOT NULL AND op <> '(probe)'
  GROUP BY run, CAST(step AS BIGINT), op, pass
), totals AS (
  SELECT run, CAST(step AS BIGINT) AS step, SUM(samples) AS total
  FROM ops
  GROUP BY run, CAST(step AS BIGINT)
), numbered AS (
  SELECT run, step, total,
         ROW_NUMBER() OVER (PARTITION BY run ORDER BY step) AS k,
         COUNT(*) OVER (PARTITION BY run) AS n
  FROM totals
  WHERE total > 0
), halves AS (
  SELECT run, step, total, CASE WHEN 2 * k <= n THEN 1 ELSE 0 END AS early
  FROM numbered
), counts AS (
  SELECT run, SUM(early) AS n_early, SUM(1 - early) AS n_late
  FROM halves
  GROUP BY run
), shares AS (
  SELECT h.run AS run, h.step AS step, h.early AS early, p.op AS op, p.pass AS pass,
         CAST(p.samples AS DOUBLE) / CAST(h.total AS DOUBLE) AS share
  FROM halves h
  JOIN per_step p ON p.run = h.run AND p.step = h.step
)
SELECT s.run AS run, s.op AS op, s.pass AS pass,
       COALESCE(SUM(CASE WHEN s.early = 1 THEN s.share END), 0) / MAX(c.n_early) AS share_before,
       COALESCE(SUM(CASE WHEN s.early = 0 THEN s.share END), 0) / MAX(c.n_late) AS share_after,
       MIN(CASE WHEN s.early = 0 THEN s.step END) AS from_step
FROM shares s
JOIN counts c ON c.run = s.run
WHERE c.n_early >= 2 AND c.n_late >= 2
GROUP BY s.run, s.op, s.pass
HAVING COALESCE(SUM(CASE WHEN s.early = 0 THEN s.share END), 0) / MAX(c.n_late)
     - COALESCE(SUM(CASE WHEN s.early = 1 THEN s.share END), 0) / MAX(c.n_early) >= 0.02
ORDER BY run, op, pass;

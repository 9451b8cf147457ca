-- The peak of each pass (all devices): the highest live total after any event inside a span
-- that declares the pass, or carried into one (what was live when it began, after every event
-- strictly before its start). A span never closed runs to the end of the trace.
WITH live AS (
  SELECT run_id, rank, timestamp_ns, event_index,
         SUM(live_delta_bytes) OVER (
           PARTITION BY run_id, rank
           ORDER BY timestamp_ns, event_index
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS live_bytes
  FROM memory_events
),
pass_spans AS (
  SELECT run_id, rank, pass, start_ns,
         COALESCE(end_ns, CAST(18446744073709551615 AS UBIGINT)) AS end_ns
  FROM spans
  WHERE pass IS NOT NULL
),
inside AS (
  SELECT p.run_id, p.rank, p.pass, MAX(l.live_bytes) AS peak_bytes
  FROM pass_spans p
  JOIN live l
    ON l.run_id = p.run_id AND l.rank IS NOT DISTINCT FROM p.rank
   AND l.timestamp_ns >= p.start_ns
   AND (l.timestamp_ns < p.end_ns OR (p.start_ns = p.end_ns AND l.timestamp_ns = p.start_ns))
  GROUP BY p.run_id, p.rank, p.pass
),
carried AS (
  SELECT p.run_id, p.rank, p.pass,
         MAX(COALESCE((
           SELECT l.live_bytes FROM live l
           WHERE l.run_id = p.run_id AND l.rank IS NOT DISTINCT FROM p.rank
             AND l.timestamp_ns < p.start_ns
           ORDER BY l.timestamp_ns DESC, l.event_index DESC
           LIMIT 1), 0)) AS peak_bytes
  FROM pass_spans p
  GROUP BY p.run_id, p.rank, p.pass
)
SELECT c.run_id, c.rank, c.pass,
       GREATEST(COALESCE(i.peak_bytes, 0), c.peak_bytes) AS peak_bytes
FROM carried c
LEFT JOIN inside i
  ON i.run_id = c.run_id AND i.rank IS NOT DISTINCT FROM c.rank AND i.pass = c.pass
ORDER BY c.rank, c.run_id, c.pass;

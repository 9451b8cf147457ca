-- The peak of each pass (all devices): the highest live total after any event inside a span
-- that declares the pass, or carried into one (what was live when it began, after every event
-- strictly before its start). A span never closed runs to the end of the trace.
-- One running sum over the memory events with a marker row (delta 0) at each pass span's
-- start, ordered before the events of that nanosecond: the sum at a marker is what the span
-- carried in. Portable SQL: DuckDB, DataFusion and Spark run it as written.
WITH marked AS (
  SELECT run_id, rank, timestamp_ns, 1 AS ord, event_index, live_delta_bytes,
         CAST(NULL AS STRING) AS pass
  FROM memory_events
  UNION ALL
  SELECT run_id, rank, start_ns, 0, 0, 0, pass
  FROM spans
  WHERE pass IS NOT NULL
),
live AS (
  SELECT run_id, rank, timestamp_ns, ord, pass,
         SUM(live_delta_bytes) OVER (
           PARTITION BY run_id, rank
           ORDER BY timestamp_ns, ord, event_index
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS live_bytes
  FROM marked
),
carried AS (
  SELECT run_id, rank, pass, MAX(live_bytes) AS peak_bytes
  FROM live
  WHERE ord = 0
  GROUP BY run_id, rank, pass
),
inside AS (
  SELECT p.run_id, p.rank, p.pass, MAX(l.live_bytes) AS peak_bytes
  FROM spans p
  JOIN live l
    ON l.run_id = p.run_id AND (l.rank IS NOT DISTINCT FROM p.rank)
   AND l.ord = 1
   AND l.timestamp_ns >= p.start_ns
   AND (p.end_ns IS NULL OR l.timestamp_ns < p.end_ns
        OR (p.start_ns = p.end_ns AND l.timestamp_ns = p.start_ns))
  WHERE p.pass IS NOT NULL
  GROUP BY p.run_id, p.rank, p.pass
)
SELECT c.run_id, c.rank, c.pass,
       GREATEST(COALESCE(i.peak_bytes, 0), c.peak_bytes) AS peak_bytes
FROM carried c
LEFT JOIN inside i
  ON i.run_id = c.run_id AND (i.rank IS NOT DISTINCT FROM c.rank) AND i.pass = c.pass
ORDER BY c.rank, c.run_id, c.pass;

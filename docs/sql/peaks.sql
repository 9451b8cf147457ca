-- The logical peak of each trace, to the byte: the running sum of live_delta_bytes in apply
-- order (timestamp_ns, then file order) is the live-bytes timeline; its maximum is the peak.
WITH live AS (
  SELECT run_id, rank, timestamp_ns, event_index,
         SUM(live_delta_bytes) OVER (
           PARTITION BY run_id, rank
           ORDER BY timestamp_ns, event_index
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS live_bytes
  FROM memory_events
)
SELECT run_id, rank, MAX(live_bytes) AS peak_bytes
FROM live
GROUP BY run_id, rank
ORDER BY rank, run_id;

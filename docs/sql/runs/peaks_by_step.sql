-- Peak by model and step, over a week of run directories: each capture's logical peak (the
-- running sum of live_delta_bytes in apply order, as peaks.sql), with its model (the
-- entrypoint), its run directory and its captured step (the hive partition columns run, step).
WITH live AS (
  SELECT run, CAST(step AS BIGINT) AS step, run_id,
         SUM(live_delta_bytes) OVER (
           PARTITION BY run, step, run_id, rank
           ORDER BY timestamp_ns, event_index
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS live_bytes
  FROM memory_events
)
SELECT r.entrypoint AS model, l.run AS run, l.step AS step, MAX(l.live_bytes) AS peak_bytes
FROM live l
JOIN runs r ON r.run_id = l.run_id
GROUP BY r.entrypoint, l.run, l.step
ORDER BY model, run, step;

-- Each device's own logical peak: the same running sum, per device.
WITH live AS (
  SELECT run_id, rank, device,
         SUM(live_delta_bytes) OVER (
           PARTITION BY run_id, rank, device
           ORDER BY timestamp_ns, event_index
           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS live_bytes
  FROM memory_events
)
SELECT run_id, rank, device, MAX(live_bytes) AS peak_bytes
FROM live
GROUP BY run_id, rank, device
ORDER BY rank, run_id, device;

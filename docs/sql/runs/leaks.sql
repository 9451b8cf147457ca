-- Leaks: runs whose live memory at the step's end grows across captures — the process heap
-- (runs.heap_end_bytes: the counting allocator, less the probe's symbol cache and bundler) or
-- else the logical bytes live after the step — along a line: a least-squares slope of 64 KiB
-- per 1,000 steps or more that explains at least 80% of the variation between captures
-- (REGR_R2 >= 0.8: noise around a flat heap does not), over at least three captures, and a
-- fitted rise of at least 1 MiB from the first capture to the last: the heap after a step
-- moves by a few hundred KiB between captures of a run that does not leak (the probe's writer
-- and drainer hold what they have not yet written), so a line through ten such captures can
-- fit well and still be noise; a slow leak needs captures over enough steps to rise past it.
SELECT run,
       COUNT(*) AS captures,
       MIN(CAST(step AS BIGINT)) AS first_step,
       MAX(CAST(step AS BIGINT)) AS last_step,
       REGR_SLOPE(CAST(COALESCE(heap_end_bytes, live_end_bytes) AS DOUBLE),
                  CAST(step AS DOUBLE)) * 1000 AS bytes_per_1000_steps,
       REGR_R2(CAST(COALESCE(heap_end_bytes, live_end_bytes) AS DOUBLE),
               CAST(step AS DOUBLE)) AS r2
FROM runs
WHERE COALESCE(heap_end_bytes, live_end_bytes) IS NOT NULL
GROUP BY run
HAVING COUNT(*) >= 3
   AND REGR_SLOPE(CAST(COALESCE(heap_end_bytes, live_end_bytes) AS DOUBLE),
                  CAST(step AS DOUBLE)) * 1000 >= 65536
   AND REGR_R2(CAST(COALESCE(heap_end_bytes, live_end_bytes) AS DOUBLE),
               CAST(step AS DOUBLE)) >= 0.8
   AND REGR_SLOPE(CAST(COALESCE(heap_end_bytes, live_end_bytes) AS DOUBLE),
                  CAST(step AS DOUBLE))
       * (MAX(CAST(step AS BIGINT)) - MIN(CAST(step AS BIGINT))) >= 1048576
ORDER BY run;

-- The straggler of one job's ranks: the complete rank with the longest step (measured region),
-- against the median step of the other ranks (rounded down to the nanosecond).
-- Portable SQL: DuckDB, DataFusion and Spark run it as written.
WITH step AS (
  SELECT rank, outer_wall_time_ns AS step_ns
  FROM runs
  WHERE NOT truncated AND outer_wall_time_ns IS NOT NULL AND rank IS NOT NULL
),
slowest AS (
  SELECT rank, step_ns FROM step ORDER BY step_ns DESC, rank ASC LIMIT 1
),
others AS (
  SELECT CAST(FLOOR(MEDIAN(o.step_ns)) AS BIGINT) AS median_ns
  FROM step o CROSS JOIN slowest s
  WHERE o.rank <> s.rank
)
SELECT s.rank, s.step_ns, o.median_ns AS others_median_ns, s.step_ns - o.median_ns AS excess_ns
FROM slowest s CROSS JOIN others o;

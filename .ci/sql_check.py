"""Checks the Parquet export with a SQL engine (called by .ci/sql-test).

Usage: sql_check.py --engine duckdb|datafusion|spark TABLES_DIR MEMORY_JSON... --ranks RANKS_JSON
       sql_check.py --engine duckdb|datafusion --runs RUN_TABLES_DIR LEAKY=STORY_JSON PLAIN=STORY_JSON

Runs the queries the README shows over the tables — docs/sql/<name>.sql (DuckDB), or the
engine's own spelling docs/sql/<engine>/<name>.sql where it differs — and compares, exactly,
each trace's logical peak, device peaks and pass peaks with `candle-graph memory --json`, and
the straggler with `candle-graph summary DIR --json` on the rank traces. Exits 1 on any
difference, printing each.

With --runs it reads the hive-partitioned export of run directories (`export --format parquet
RUN_DIR...`: TABLE/run=NAME/step=N/part-0.parquet) and runs docs/sql/runs/*.sql: every
capture's peak by model and step must equal the peak of `series RUN_DIR --json`
(`captures[].peak_bytes`) of both runs, `leaks` must name the run seeded with a leak and not
the plain one; the op share regressions must name the seeded run's exp or log and never the
probe's own `(probe)` row, and are printed.
"""

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SQL = ROOT / "docs" / "sql"
TABLES = ["runs", "spans", "storages", "memory_events", "ops", "gradients", "findings"]


class DuckDB:
    """DuckDB (`duckdb` from PyPI): views over read_parquet."""

    def __init__(self, tables):
        import duckdb

        self.version = f"duckdb {duckdb.__version__}"
        self.con = duckdb.connect()
        for t in TABLES:
            path = (tables / f"{t}.parquet").as_posix().replace("'", "''")
            self.con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{path}')")

    def rows(self, sql):
        return [tuple(r) for r in self.con.execute(sql).fetchall()]


class DataFusion:
    """Apache DataFusion's Python bindings (`datafusion` from PyPI): registered Parquet tables."""

    def __init__(self, tables):
        import datafusion

        self.version = f"datafusion {datafusion.__version__}"
        self.ctx = datafusion.SessionContext()
        for t in TABLES:
            self.ctx.register_parquet(t, (tables / f"{t}.parquet").as_posix())

    def rows(self, sql):
        return [tuple(d.values()) for d in self.ctx.sql(sql).to_pylist()]


class Spark:
    """Spark SQL (`pyspark` from PyPI, a local session on the JVM): temporary views."""

    def __init__(self, tables):
        import pyspark
        from pyspark.sql import SparkSession

        self.version = f"spark {pyspark.__version__}"
        self.spark = (
            SparkSession.builder.master("local[1]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        for t in TABLES:
            self.spark.read.parquet((tables / f"{t}.parquet").as_posix()).createOrReplaceTempView(t)

    def rows(self, sql):
        return [tuple(r) for r in self.spark.sql(sql).collect()]


ENGINES = {"duckdb": DuckDB, "datafusion": DataFusion, "spark": Spark}
RUN_TABLES = ["runs", "memory_events", "ops"]


class RunDuckDB(DuckDB):
    """DuckDB over the hive-partitioned tables of run directories."""

    def __init__(self, tables):
        import duckdb

        self.version = f"duckdb {duckdb.__version__}"
        self.con = duckdb.connect()
        for t in RUN_TABLES:
            glob = (tables / t / "**" / "*.parquet").as_posix().replace("'", "''")
            self.con.execute(
                f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{glob}', hive_partitioning = true)"
            )


class RunDataFusion(DataFusion):
    """DataFusion over the same files: external tables partitioned by run and step."""

    def __init__(self, tables):
        import datafusion

        self.version = f"datafusion {datafusion.__version__}"
        self.ctx = datafusion.SessionContext()
        for t in RUN_TABLES:
            self.ctx.sql(
                f"CREATE EXTERNAL TABLE {t} STORED AS PARQUET PARTITIONED BY (run, step) "
                f"LOCATION '{(tables / t).as_posix()}/'"
            ).collect()


RUN_ENGINES = {"duckdb": RunDuckDB, "datafusion": RunDataFusion}


def check_runs(engine_name, argv):
    tables = pathlib.Path(argv[0])
    stories = {}
    for arg in argv[1:]:
        name, _, f = arg.partition("=")
        stories[name] = json.loads(pathlib.Path(f).read_text())
    engine = RUN_ENGINES[engine_name](tables)
    tag = f"{engine_name}-runs-test"

    def query(name):
        return engine.rows((SQL / "runs" / f"{name}.sql").read_text())

    failures = []
    checked = 0
    peaks = {(str(run), int(step)): int(b) for _, run, step, b in query("peaks_by_step")}
    for run, story in stories.items():
        for c in story["captures"]:
            want = c.get("peak_bytes")
            got = peaks.get((run, int(c["step"])))
            checked += 1
            if got != want:
                failures.append(f"{run} step {c['step']}: SQL peak {got}, series --json {want}")
    leaks = {str(r[0]) for r in query("leaks")}
    names = list(stories)
    leaky, plain = names[0], names[1]
    checked += 2
    if leaky not in leaks:
        failures.append(f"leaks: the seeded run {leaky} is not named (got {sorted(leaks)})")
    if plain in leaks:
        failures.append(f"leaks: the plain run {plain} is named")
    regressions = [tuple(r) for r in query("op_share_regressions")]
    for row in regressions:
        print(f"{tag}: op share regression {row}")
    checked += 2
    if not any(str(r[0]) == leaky and str(r[1]) in ("exp", "log") for r in regressions):
        failures.append(f"op_share_regressions: the seeded exp/log of {leaky} are not named")
    if any(str(r[1]) == "(probe)" for r in regressions):
        failures.append("op_share_regressions: the probe's own row is named")
    for f in failures:
        print(f"{tag}: MISMATCH {f}")
    print(f"{tag}: {checked} figures compared, {len(failures)} mismatches ({engine.version})")
    return 1 if failures or checked == 0 else 0


def query_text(engine, name):
    """The engine's own spelling of a query when it has one, else DuckDB's."""
    own = SQL / engine / f"{name}.sql"
    return (own if own.exists() else SQL / f"{name}.sql").read_text()


def main(argv):
    engine_at = argv.index("--engine")
    engine_name = argv[engine_at + 1]
    del argv[engine_at : engine_at + 2]
    if argv[0] == "--runs":
        return check_runs(engine_name, argv[1:])
    tables = pathlib.Path(argv[0])
    ranks_at = argv.index("--ranks")
    memory_files = argv[1:ranks_at]
    ranks_json = json.loads(pathlib.Path(argv[ranks_at + 1]).read_text())
    engine = ENGINES[engine_name](tables)
    tag = f"{engine_name}-test"

    def query(name):
        return engine.rows(query_text(engine_name, name))

    def key(rank):
        return None if rank is None else int(rank)

    peaks = {(r, key(rank)): int(b) for r, rank, b in query("peaks")}
    device_peaks = {(r, key(rank), d): int(b) for r, rank, d, b in query("device_peaks")}
    pass_peaks = {(r, key(rank), p): int(b) for r, rank, p, b in query("pass_peaks")}
    sources = {s: (r, key(rank)) for s, r, rank in engine.rows("SELECT source, run_id, rank FROM runs")}
    failures = []
    checked = 0
    for f in memory_files:
        m = json.loads(pathlib.Path(f).read_text())
        # the memory report does not carry the run id: find it by source path in `runs`
        source = m["input"]["path"]
        if source not in sources:
            failures.append(f"{source}: not in runs.parquet")
            continue
        run_id, rank = sources[source]
        peak = m.get("memory_peak")
        if peak is None:
            failures.append(f"{source}: no memory_peak in the memory report")
            continue
        got = peaks.get((run_id, rank))
        checked += 1
        if got != peak["live_bytes"]:
            failures.append(f"{source}: SQL peak {got}, memory --json {peak['live_bytes']}")
        for pp in peak.get("pass_peaks", []):
            got = pass_peaks.get((run_id, rank, pp["pass"]))
            checked += 1
            if got != pp["live_bytes"]:
                failures.append(
                    f"{source}: SQL {pp['pass']} peak {got}, memory --json {pp['live_bytes']}"
                )
        for dp in m.get("device_peaks", []):
            got = device_peaks.get((run_id, rank, dp["device"]))
            checked += 1
            if got != dp["live_bytes"]:
                failures.append(
                    f"{source}: SQL {dp['device']} peak {got}, memory --json {dp['live_bytes']}"
                )
    s = ranks_json.get("straggler")
    rows = query("straggler")
    if s is None or len(rows) != 1:
        failures.append(f"straggler: summary says {s}, SQL gives {rows}")
    else:
        got = tuple(int(x) for x in rows[0])
        want = (s["rank"], s["step"]["rank_ns"], s["step"]["others_median_ns"], s["step"]["excess_ns"])
        checked += 1
        if got != want:
            failures.append(f"straggler: SQL {rows[0]}, summary --json {want}")
    for f in failures:
        print(f"{tag}: MISMATCH {f}")
    print(f"{tag}: {checked} figures compared, {len(failures)} mismatches ({engine.version})")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Checks the Parquet export with DuckDB (called by .ci/duckdb-test).

Usage: duckdb_check.py TABLES_DIR MEMORY_JSON... --ranks RANKS_JSON

Runs docs/sql/*.sql (the queries the README shows) over the tables and compares, exactly,
each trace's logical peak, device peaks and pass peaks with `candle-graph memory --json`, and
the straggler with `candle-graph summary DIR --json` on the rank traces. Exits 1 on any
difference, printing each.
"""

import json
import pathlib
import sys

import duckdb

ROOT = pathlib.Path(__file__).resolve().parent.parent
SQL = ROOT / "docs" / "sql"
TABLES = ["runs", "spans", "storages", "memory_events", "ops", "gradients", "findings"]


def main(argv):
    tables = pathlib.Path(argv[0])
    ranks_at = argv.index("--ranks")
    memory_files = argv[1:ranks_at]
    ranks_json = json.loads(pathlib.Path(argv[ranks_at + 1]).read_text())
    con = duckdb.connect()
    for t in TABLES:
        path = (tables / f"{t}.parquet").as_posix().replace("'", "''")
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{path}')")

    def query(name):
        return con.execute((SQL / f"{name}.sql").read_text()).fetchall()

    peaks = {(r, rank): int(b) for r, rank, b in query("peaks")}
    device_peaks = {(r, rank, d): int(b) for r, rank, d, b in query("device_peaks")}
    pass_peaks = {(r, rank, p): int(b) for r, rank, p, b in query("pass_peaks")}
    failures = []
    checked = 0
    for f in memory_files:
        m = json.loads(pathlib.Path(f).read_text())
        # the memory report does not carry the run id: find it by source path in `runs`
        source = m["input"]["path"]
        row = con.execute(
            "SELECT run_id, rank FROM runs WHERE source = ?", [source]
        ).fetchone()
        if row is None:
            failures.append(f"{source}: not in runs.parquet")
            continue
        run_id, rank = row
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
        rank, step_ns, median_ns, excess_ns = rows[0]
        want = (s["rank"], s["step"]["rank_ns"], s["step"]["others_median_ns"], s["step"]["excess_ns"])
        checked += 1
        if (rank, int(step_ns), int(median_ns), int(excess_ns)) != want:
            failures.append(f"straggler: SQL {rows[0]}, summary --json {want}")
    for f in failures:
        print(f"duckdb-test: MISMATCH {f}")
    print(f"duckdb-test: {checked} figures compared, {len(failures)} mismatches "
          f"(duckdb {duckdb.__version__})")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

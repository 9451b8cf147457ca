"""Of several recordings of one side, keeps the fastest by wall time — on a shared machine
another process's load only adds time, so the fastest run is the least disturbed — and says
which, with every run's wall time, in runs.json.

    python pick_run.py candle|pytorch OUT_TRACE RUNS_JSON TRACE [TRACE ...]

Wall time: a Candle trace's captured steps (the `span_end` durations of its top-level
`conformance::train_step` spans, summed); a PyTorch trace's `ProfilerStep#N` ranges, summed.
"""

import gzip
import json
import shutil
import sys


def candle_wall(path):
    tops, total = set(), 0
    with open(path) as f:
        for line in f:
            if '"span_start"' in line and '"conformance::train_step"' in line:
                tops.add(json.loads(line)["id"])
            elif '"span_end"' in line:
                e = json.loads(line)
                if e["id"] in tops:
                    total += e.get("duration_ns") or 0
    return total


def pytorch_wall(path):
    with gzip.open(path) as f:
        d = json.load(f)
    return int(sum(e["dur"] * 1000 for e in d["traceEvents"]
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")))


def main():
    side, out, runs_json, traces = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    wall = candle_wall if side == "candle" else pytorch_wall
    walls = [(wall(t), i, t) for i, t in enumerate(traces)]
    chosen = min(walls)
    if side == "candle":
        with open(chosen[2], "rb") as src, open(out, "wb") as dst_file:
            with gzip.GzipFile(filename="", mode="wb", fileobj=dst_file, mtime=0) as dst:
                shutil.copyfileobj(src, dst)
    else:
        shutil.copyfile(chosen[2], out)
        side_file = chosen[2][: -len(".json.gz")] + ".candle-graph.json"
        shutil.copyfile(side_file, out[: -len(".json.gz")] + ".candle-graph.json")
    try:
        with open(runs_json) as f:
            record = json.load(f)
    except FileNotFoundError:
        record = {}
    record[side] = {"runs": len(traces), "chosen": chosen[1] + 1,
                    "rule": "the fastest run by wall time (the least disturbed by the machine's load)",
                    "wall_ms": [round(w / 1e6, 2) for w, _, _ in walls]}
    with open(runs_json, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    print(f"{out}: run {chosen[1] + 1} of {len(traces)} ({chosen[0] / 1e6:.1f} ms)")


if __name__ == "__main__":
    main()

"""Merges the clock runs of one family (both sides, several interleaved rounds) into the
committed clock table, `clock.json`:

    python merge.py OUT.json RUN.json [RUN.json ...]

Per side, pass and op name (as the trace names it), and shape description: the repetitions of
every round pooled, then `median_ns`, and the spread `p25_ns`..`p75_ns` (the interquartile
range of the pooled repetitions), times `count` (how many times the step runs it). Rows of
the same op at different shapes stay separate rows. The tests map each op to its role with
the diff's own role map and sum the rows of a role: its clock time, per side and pass.
"""

import json
import sys


def quantile(xs, q):
    xs = sorted(xs)
    if not xs:
        return 0
    i = min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))
    return xs[i]


def main():
    out, runs = sys.argv[1], sys.argv[2:]
    rows, meta = {}, {"rounds": {}}
    order = []
    for path in runs:
        with open(path) as f:
            run = json.load(f)
        side = run["side"]
        meta["family"] = run["family"]
        meta["rounds"][side] = meta["rounds"].get(side, 0) + 1
        meta.setdefault("reps_per_round", run["reps"])
        if "torch_version" in run:
            meta["torch_version"] = run["torch_version"]
        seen = {}
        for r in run["rows"]:
            # the i-th row of this (pass, op, what) in this run: rows of one op at one shape
            # (two relus of the same size) stay apart and match across rounds by position
            k0 = (side, r["pass"], r["op"], r["what"])
            seen[k0] = seen.get(k0, 0) + 1
            key = k0 + (seen[k0],)
            if key not in rows:
                rows[key] = {"count": r["count"], "ns": []}
                order.append(key)
            rows[key]["ns"].extend(r["ns"])
    table = []
    for key in order:
        side, pass_, op, what, _ = key
        ns, count = rows[key]["ns"], rows[key]["count"]
        table.append({"side": side, "pass": pass_, "op": op, "what": what, "count": count,
                      "repetitions": len(ns),
                      "median_ns": quantile(ns, 0.5) * count,
                      "p25_ns": quantile(ns, 0.25) * count,
                      "p75_ns": quantile(ns, 0.75) * count})
    meta["about"] = ("Issue 43's conformance clock: each op of the training step timed alone at "
                     "the model's shapes (scripts/conformance/), no profiler, one thread; "
                     "median and interquartile range of the pooled repetitions, times count.")
    meta["rows"] = table
    with open(out, "w") as f:
        json.dump(meta, f, indent=0)
        f.write("\n")
    print(f"{out}: {len(table)} rows")


if __name__ == "__main__":
    main()

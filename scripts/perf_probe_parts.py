#!/usr/bin/env python3
# Used by crates/trace-probe/docs/cost.md (2026-12-07): the probe's parts in a perf profile of ab_overhead.
"""Charges each training-thread sample inside the measured step to a probe part.

Reads `perf script` output (frames innermost first). A sample counts when its stack holds the
bench's step frame (`Run::step` / `Probed::step`) on the training thread (the process's main
tid). It is charged to the outermost probe frame below the user-facing wrappers; the system
allocator under the hook (malloc/free/memset/realloc) is the user's."""
import re, sys, collections
WRAPPERS = re.compile(r"trace_probe::nn::|ProbedOptimizer.*::(backward_step|step|facts_and_step)|trace_probe::profiler::|Profiler|Traced|StepGuard|as core::ops::drop::Drop>::drop|SpanGuard|TraceSession::pass|PassGuard")
PROBE = re.compile(r"trace_probe::|trace_alloc::|trace_sampler::|__rustc::__rust_(alloc|dealloc|realloc|alloc_zeroed)")
SYSALLOC = re.compile(r"^(malloc|free|cfree|realloc|calloc|memset|__memset|_int_malloc|_int_free|__libc_|memcpy|__memmove|__memcpy|sysmalloc|malloc_consolidate|unlink_chunk|__GI_)|std::sys::alloc|System as core::alloc")
def part(frames):
    # frames: outermost first, from below the step frame
    for i, f in enumerate(frames):
        if not PROBE.search(f) or WRAPPERS.search(f):
            continue
        inner = frames[i:]
        # the hook calling the system allocator: the user's allocation
        if re.search(r"Tracking.*GlobalAlloc|trace_alloc::hook|__rustc::__rust_", f):
            rest = inner[1:]
            if rest and all(not PROBE.search(x) for x in rest) and not any(re.search(r"clock_gettime|vdso", x) for x in rest):
                return None
            if any(re.search(r"process_ns|clock_gettime|monotonic_ns|vdso", x) for x in inner):
                return "allocator hook: clock"
            if any("sites::" in x or "walk::" in x for x in inner):
                return "allocator hook: site walk"
            return "allocator hook: own code"
        s = " ".join(inner)
        for name, pat in [
            ("gradient facts", r"gradient_facts|batched_facts|host_facts|sum_of_squares|FactsBeside"),
            ("helper hand-off/join (beside)", r"beside::"),
            ("capture start (meta, adoption)", r"begin_capture|on_capture_start|write_meta|adopt_live|on_meta|begin_session|run_meta"),
            ("graph registration", r"register_graph|GraphBeside|on_loss"),
            ("gradient registration", r"register_grads|on_gradients"),
            ("capture end", r"on_capture_end|end_pending|close_capture|run_capture_end"),
            ("span ends, device samples, layer", r"on_span_end|device_mem|close_span|open_span|ProbeLayer|layer::|log_close|spans::|attribution::"),
        ]:
            if re.search(pat, s):
                return name
        return "other probe: " + re.sub(r"<.*?>", "", f.split(" ")[1] if " " in f else f)[:60]
    return None
def main(path):
    tid_main = None
    counts = collections.Counter(); total = 0
    sample = None; frames = []
    def flush():
        nonlocal total
        if sample is None: return
        pid, tid = sample
        if pid != tid: return
        names = [l.split(None, 1)[1] if " " in l else l for l in frames]
        outer = list(reversed(names))
        idx = [i for i, f in enumerate(outer) if re.search(r"ab_overhead::(Run|Probed)::step", f)]
        if not idx: return
        below = outer[idx[0] + 1:]
        total += 1
        p = part(below)
        if p: counts[p] += 1
    for line in open(path, errors="replace"):
        if not line.strip():
            flush(); sample = None; frames = []; continue
        if not line.startswith((" ", "\t")):
            m = re.match(r"\S+\s+(\d+)/(\d+)", line) or re.match(r"\S+\s+(\d+)\s", line)
            if m and m.lastindex == 2: sample = (m.group(1), m.group(2))
            elif m: sample = (m.group(1), m.group(1))
            frames = []
        else:
            frames.append(line.strip())
    flush()
    print(f"samples inside the step on the training thread: {total}")
    probe = sum(counts.values())
    for k, v in counts.most_common():
        print(f"  {k:45s} {v:6d}  {100*v/total:5.2f}%")
    print(f"  {'all probe code on the training thread':45s} {probe:6d}  {100*probe/max(total,1):5.2f}%")
main(sys.argv[1])

"""Profile two small PyTorch training steps with torch.profiler and write Kineto traces.

Run by `cargo xtask pytorch-fixtures` (which makes the virtual environment); by hand:
    python xtask/pytorch/profile_fixtures.py OUT_DIR

Writes OUT_DIR/mlp.json.gz and OUT_DIR/transformer.json.gz: the Chrome-trace JSON of
`export_chrome_trace`, gzipped with a zero mtime; and beside each, NAME.key_averages.json:
PyTorch's own `key_averages()` of the same recorded step (by name, and by input shape), the
reference the `ops` table of an import is tested against. The trace's top-level
`candle_graph` metadata (`add_metadata_json`) says what the trace itself cannot: the warm-up
steps before the recorded one, torch's intra-op threads, the host (os, arch, CPUs, memory). Each model trains on CPU, seeded, with AdamW;
the profiler schedule skips one step (warm-up) and records the next (`ProfilerStep#1`), with
profile_memory=True and record_shapes=True. The forward pass is wrapped in
record_function("forward"): PyTorch records no forward marker of its own. Backward and the
optimizer step are left as PyTorch records them (autograd ops, `Optimizer.step#AdamW.step`).

Each step runs forward, backward, optimizer step, then zero_grad(set_to_none=True), so the
gradients of the recorded step are freed inside the window, as Candle drops its gradient store
at the end of a step. Torch runs on one intra-op thread.
"""

import gzip
import json
import os
import platform
import shutil
import sys
import tempfile

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule


def mlp():
    """The 784-512-512-10 MLP of examples/src/mlp.rs: ReLU, cross-entropy, batch 64, AdamW 1e-3."""
    torch.manual_seed(42)
    model = nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [(torch.randn(64, 784), torch.randint(0, 10, (64,))) for _ in range(2)]

    def loss(batch):
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)

    return opt, batches, loss


def transformer():
    """One encoder layer (d_model 64, 4 heads, feed-forward 128, no dropout), batch 8 × 16
    tokens, mean squared error against a random target, AdamW 1e-3."""
    torch.manual_seed(42)
    model = nn.TransformerEncoderLayer(
        d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [(torch.randn(8, 16, 64), torch.randn(8, 16, 64)) for _ in range(2)]

    def loss(batch):
        x, y = batch
        return nn.functional.mse_loss(model(x), y)

    return opt, batches, loss


def averages(prof, by_shape):
    """`key_averages()` as data: times in µs as PyTorch computes them."""
    rows = []
    for e in prof.key_averages(group_by_input_shape=by_shape):
        row = {
            "key": e.key,
            "count": e.count,
            "self_cpu_time_total_us": e.self_cpu_time_total,
            "cpu_time_total_us": e.cpu_time_total,
        }
        if by_shape:
            row["input_shapes"] = str(e.input_shapes)
        rows.append(row)
    return rows


def host():
    memory = None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "os": platform.system().lower(),
        "arch": platform.machine(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory,
    }


def profile_model(name, build, out_dir):
    opt, batches, loss_fn = build()
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, f"{name}.json")
        key_averages = {}

        def ready(p):
            key_averages["by_name"] = averages(p, False)
            key_averages["by_input_shape"] = averages(p, True)
            p.export_chrome_trace(raw)

        with profile(
            activities=[ProfilerActivity.CPU],
            profile_memory=True,
            record_shapes=True,
            schedule=schedule(wait=0, warmup=1, active=1),
            on_trace_ready=ready,
        ) as prof:
            prof.add_metadata_json(
                "candle_graph",
                json.dumps(
                    {
                        "warmup_steps": 1,
                        "capture_step": 2,
                        "intra_op_threads": torch.get_num_threads(),
                        "torch_version": torch.__version__,
                        "host": host(),
                    }
                ),
            )
            for batch in batches:
                with record_function("forward"):
                    loss = loss_fn(batch)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                del loss
                prof.step()
        target = os.path.join(out_dir, f"{name}.json.gz")
        with open(raw, "rb") as src, open(target, "wb") as dst_file:
            with gzip.GzipFile(filename="", mode="wb", fileobj=dst_file, mtime=0) as dst:
                shutil.copyfileobj(src, dst)
    averages_path = os.path.join(out_dir, f"{name}.key_averages.json")
    with open(averages_path, "w") as f:
        json.dump(key_averages, f, indent=1)
        f.write("\n")
    print(f"wrote {target} ({os.path.getsize(target)} bytes) and {averages_path}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: profile_fixtures.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    # One intra-op thread: steadier times on a shared machine; compare with a Candle run under
    # RAYON_NUM_THREADS=1.
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    profile_model("mlp", mlp, out_dir)
    profile_model("transformer", transformer, out_dir)


if __name__ == "__main__":
    main()

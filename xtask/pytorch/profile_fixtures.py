"""Profile two small PyTorch training steps with torch.profiler and write Kineto traces.

Run by `cargo xtask pytorch-fixtures` (which makes the virtual environment); by hand:
    python xtask/pytorch/profile_fixtures.py OUT_DIR

Writes OUT_DIR/mlp.json.gz and OUT_DIR/transformer.json.gz: the Chrome-trace JSON of
`export_chrome_trace`, gzipped with a zero mtime. Each model trains on CPU, seeded, with AdamW;
the profiler schedule skips one step (warm-up) and records the next (`ProfilerStep#1`), with
profile_memory=True and record_shapes=True. The forward pass is wrapped in
record_function("forward"): PyTorch records no forward marker of its own. Backward and the
optimizer step are left as PyTorch records them (autograd ops, `Optimizer.step#AdamW.step`).

Each step runs forward, backward, optimizer step, then zero_grad(set_to_none=True), so the
gradients of the recorded step are freed inside the window, as Candle drops its gradient store
at the end of a step. Torch runs on one intra-op thread.
"""

import gzip
import os
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


def profile_model(name, build, out_dir):
    opt, batches, loss_fn = build()
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, f"{name}.json")
        with profile(
            activities=[ProfilerActivity.CPU],
            profile_memory=True,
            record_shapes=True,
            schedule=schedule(wait=0, warmup=1, active=1),
            on_trace_ready=lambda p: p.export_chrome_trace(raw),
        ) as prof:
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
    print(f"wrote {target} ({os.path.getsize(target)} bytes)")


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

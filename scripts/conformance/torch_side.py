"""The PyTorch side of issue 43's conformance suite: the twins of examples/src/conformance/models.rs
(same families, sizes and op order), profiled with torch.profiler, and each op of their training
step timed alone with a clock.

Needs torch from PyPI (`pip install --no-cache-dir torch numpy`: the CPU-only index is not
reachable from here, so this is the default wheel with its CUDA libraries, about 3 GB
installed; the suite runs on the CPU only). `run.sh` makes the environment and drives both
sides; by hand:

    python torch_side.py profile FAMILY OUT.json.gz     # Kineto trace + OUT.candle-graph.json
    python torch_side.py clock FAMILY OUT.json [REPS]    # every repetition of every op, ns

Both run on one intra-op thread (torch.set_num_threads(1)), as the Candle side runs under
RAYON_NUM_THREADS=1.

The clock, without any profiler:
- forward: every torch function the model's forward calls (intercepted with a
  TorchFunctionMode: `F.linear`, `F.conv2d`, `torch.relu`, `_VF.gru`, ...) is called again
  alone with the same arguments, REPS times after 3 unrecorded calls. Its name is the aten op
  Kineto records for it at the top level (found by one profiled run of the same forward in
  which each intercepted call is wrapped in a marker range).
- backward: every node of the autograd graph (`AddmmBackward0`, `AccumulateGrad`, ...) is
  called alone with the gradients it received in a real backward (captured by node hooks),
  named as Kineto names it (`autograd::engine::evaluate_function: AddmmBackward0`).
- optimizer: every torch function AdamW's step calls, intercepted and timed alone as forward.
"""

import gzip
import json
import os
import platform
import shutil
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, profile, record_function, schedule

MLP = (128, 784, 512, 10)
CNN = (32, 28, 16, 32, 10)
CNN_HIDDEN = 128
GRU = (32, 16, 64, 128, 10)
TRANSFORMER = (8, 32, 1024, 128, 4, 512)
# steps 2..=6 recorded after one warm-up step, as the Candle side's capture_steps(2..=6)
ACTIVE_STEPS = 5
LR = 1e-3


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        _, side, c1, c2, classes = CNN
        self.conv1 = nn.Conv2d(1, c1, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(c1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(c2)
        self.fc1 = nn.Linear(c2 * (side // 4) ** 2, CNN_HIDDEN)
        self.fc2 = nn.Linear(CNN_HIDDEN, classes)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


class Gru(nn.Module):
    def __init__(self):
        super().__init__()
        _, _, f, h, c = GRU
        self.gru = nn.GRU(f, h, batch_first=True)
        self.fc = nn.Linear(h, c)

    def forward(self, x):
        _, h = self.gru(x)
        return self.fc(h[0])


class Encoder(nn.Module):
    """The pre-norm block of models.rs: hand-written attention (PyTorch's fused
    TransformerEncoderLayer would be another model)."""

    def __init__(self):
        super().__init__()
        _, t, v, d, heads, ff = TRANSFORMER
        self.embed = nn.Embedding(v, d)
        self.pos = nn.Parameter(torch.randn(t, d) * 0.02)
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ff1 = nn.Linear(d, ff)
        self.ff2 = nn.Linear(ff, d)
        self.head = nn.Linear(d, v)

    def forward(self, tokens):
        b, t, v, d, heads, _ = TRANSFORMER
        dh = d // heads
        x = self.embed(tokens) + self.pos
        h = self.ln1(x)
        qkv = self.qkv(h).reshape(b, t, 3, heads, dh).permute(2, 0, 3, 1, 4)
        q, k, vv = qkv[0], qkv[1], qkv[2]
        scores = (q @ k.transpose(-2, -1)) * (1.0 / dh**0.5)
        att = torch.softmax(scores, dim=-1)
        y = (att @ vv).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        x = x + self.ff2(F.gelu(self.ff1(self.ln2(x)), approximate="tanh"))
        return self.head(self.ln_f(x)).reshape(b * t, v)


def build(family):
    torch.manual_seed(42)
    if family == "mlp":
        _, i, h, c = MLP
        return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, c))
    return {"cnn": Cnn, "gru": Gru, "transformer": Encoder}[family]()


def batch(family, step):
    g = torch.Generator().manual_seed(1000 + step)
    if family == "mlp":
        b, i, _, c = MLP
        return torch.rand(b, i, generator=g) * 2 - 1, torch.randint(0, c, (b,), generator=g)
    if family == "cnn":
        b, s, _, _, c = CNN
        return torch.rand(b, 1, s, s, generator=g) * 2 - 1, torch.randint(0, c, (b,), generator=g)
    if family == "gru":
        b, t, f, _, c = GRU
        return torch.rand(b, t, f, generator=g) * 2 - 1, torch.randint(0, c, (b,), generator=g)
    b, t, v, *_ = TRANSFORMER
    return torch.randint(0, v, (b, t), generator=g), torch.randint(0, v, (b * t,), generator=g)


def host():
    memory = None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    return {"os": platform.system().lower(), "arch": platform.machine(),
            "cpu_count": os.cpu_count(), "memory_bytes": memory}


def train_step(model, opt, b):
    x, y = b
    with record_function("forward"):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def profile_family(family, out):
    """Six steps, the last five recorded (schedule wait=0, warmup=1, active=5), with memory and
    shapes; the trace gzipped with a zero mtime, its metadata in the side file beside it."""
    model = build(family)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    batches = [batch(family, s) for s in range(1, ACTIVE_STEPS + 2)]
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                     schedule=schedule(wait=0, warmup=1, active=ACTIVE_STEPS),
                     on_trace_ready=lambda p: p.export_chrome_trace(raw)) as prof:
            for b in batches:
                train_step(model, opt, b)
                prof.step()
        with open(raw, "rb") as src, open(out, "wb") as dst_file:
            with gzip.GzipFile(filename="", mode="wb", fileobj=dst_file, mtime=0) as dst:
                shutil.copyfileobj(src, dst)
    side = out[: -len(".json.gz")] + ".candle-graph.json"
    with open(side, "w") as f:
        json.dump({"warmup_steps": 1, "capture_step": 2,
                   "intra_op_threads": torch.get_num_threads(),
                   "torch_version": torch.__version__, "host": host(),
                   "suite": "conformance", "model": family}, f, indent=1)
        f.write("\n")


class Record(TorchFunctionMode):
    """Keeps every top-level torch function call (func, args, kwargs, grad mode); with
    `mark`, wraps call i in a `__cg_i` range so a profiled run names its aten op."""

    def __init__(self, mark=False):
        super().__init__()
        self.calls, self.mark = [], mark

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        i = len(self.calls)
        self.calls.append((func, args, kwargs, torch.is_grad_enabled()))
        if self.mark:
            with record_function(f"__cg_{i}"):
                return func(*args, **kwargs)
        return func(*args, **kwargs)


def times(f, reps, setup=None):
    for _ in range(3):
        if setup:
            setup()
        f()
    out = []
    for _ in range(reps):
        if setup:
            setup()
        t = time.perf_counter_ns()
        f()
        out.append(time.perf_counter_ns() - t)
    return out


def aten_names(run):
    """The top-level aten ops each intercepted call of `run` made, by call index."""
    rec = Record(mark=True)
    with profile(activities=[ProfilerActivity.CPU]) as p:
        with rec:
            run()
    names = {}
    events = [e for e in p.events() if e.name.startswith("__cg_")]
    inner = [e for e in p.events() if not e.name.startswith("__cg_")]
    for m in events:
        i = int(m.name[5:])
        kids = [e for e in inner if e.time_range.start >= m.time_range.start
                and e.time_range.end <= m.time_range.end]
        top = [e for e in kids if not any(o is not e and o.time_range.start <= e.time_range.start
                                          and o.time_range.end >= e.time_range.end
                                          and (o.time_range.start, -o.time_range.end)
                                          < (e.time_range.start, -e.time_range.end)
                                          for o in kids)]
        names[i] = top[0].name if top else None
    return names


def clock_calls(pass_name, run, reps, rows):
    rec = Record()
    with rec:
        result = run()
    names = aten_names(run)
    for i, (func, args, kwargs, grad) in enumerate(rec.calls):
        name = names.get(i)
        if name is None:
            continue

        def call(func=func, args=args, kwargs=kwargs, grad=grad):
            with torch.set_grad_enabled(grad):
                func(*args, **kwargs)

        rows.append({"pass": pass_name, "op": name, "what": getattr(func, "__name__", str(func)),
                     "count": 1, "ns": times(call, reps)})
    return result


def graph_nodes(root):
    seen, order, todo = set(), [], [root]
    while todo:
        n = todo.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        order.append(n)
        todo.extend(f for f, _ in n.next_functions)
    return order


def clock_family(family, reps):
    torch.manual_seed(0)
    model = build(family)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    train_step(model, opt, batch(family, 1))  # the optimizer's state exists, as in step 2
    x, y = batch(family, 2)
    rows = []
    loss = clock_calls("forward", lambda: F.cross_entropy(model(x), y), reps, rows)
    # backward: each node alone with the gradients it got
    got = {}
    nodes = graph_nodes(loss.grad_fn)
    for n in nodes:
        n.register_hook(lambda gi, go, n=n: got.__setitem__(n, go))
    loss.backward(retain_graph=True)
    for n in nodes:
        go = got.get(n)
        if go is None:
            continue
        acc = n.name() == "torch::autograd::AccumulateGrad"
        var = getattr(n, "variable", None)

        def setup(var=var):
            if var is not None:
                var.grad = None

        label = f"autograd::engine::evaluate_function: {n.name()}"
        rows.append({"pass": "backward", "op": label, "what": n.name(), "count": 1,
                     "ns": times(lambda n=n, go=go: n(*go), reps, setup if acc else None)})
    # the optimizer: the gradients as backward left them
    clock_calls("optimizer", lambda: opt.step(), reps, rows)
    return {"side": "pytorch", "family": family, "reps": reps, "torch_version": torch.__version__,
            "rows": rows}


def main():
    torch.set_num_threads(1)
    if len(sys.argv) < 4 or sys.argv[1] not in ("profile", "clock"):
        sys.exit(__doc__)
    cmd, family, out = sys.argv[1:4]
    if cmd == "profile":
        profile_family(family, out)
    else:
        reps = int(sys.argv[4]) if len(sys.argv) > 4 else 30
        with open(out, "w") as f:
            json.dump(clock_family(family, reps), f)
    print(out)


if __name__ == "__main__":
    main()

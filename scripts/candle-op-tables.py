#!/usr/bin/env python3
"""Generates crates/trace-ops/src/rules/generated.rs from Candle's published sources.

The tables the stack-to-operation rules and the role map read (crates/trace-ops/README.md):

- BACKWARD_LINES: for candle-core's `src/backprop.rs`, every line of `Tensor::backward` with
  what a sample stopped at that line is doing: the `match` arm it is in (`Op::Matmul(..)` ->
  `matmul`), and whether the line is gradient accumulation (`grads.or_insert(..)`: zeros for a
  new accumulator; `*sum_grad = sum_grad.add(..)` / `.sub(..)`: the add into it), the sort of
  the nodes (`self.sorted_nodes()`), or the driver loop around the arms.
- NN_OPS: the public free functions of candle-nn's op files (`src/ops.rs`, `src/loss.rs`,
  `src/rotary_emb.rs`): `softmax_last_dim`, `cross_entropy`, `rope`, ... (an inlined frame has
  only its short name, so a method of those files, e.g. a custom op's `cpu_fwd`, must not
  match).
- CANDLE_OPS (`ops`, into src/rules/candle_ops.rs): every op name candle-core's and candle-nn's op files can put on a stack, with
  where it is defined (`src/conv.rs:300`): the public functions of candle-core's op files
  (`tensor.rs`, `tensor_cat.rs`, `conv.rs`, `indexer.rs`, `custom_op.rs`, `sort.rs`; also the
  methods the `unary_op!` / `binary_op!` / `binary_op_scalar!` / `broadcast_binary_op!` /
  `bin_trait!` macros define, and `IndexOp::i`) and candle-nn's NN_OPS. The role map's
  coverage test (crates/trace-ops/tests/roles.rs) checks each of them, and each backward arm of
  BACKWARD_LINES, has a role in every pass.
- HELPERS: functions of candle-core's op files (`tensor.rs`, `tensor_cat.rs`, `conv.rs`,
  `indexer.rs`) that are not public (`fn`, `pub(crate) fn`): internal helpers, never an op.

Usage (from the repository root):
    python3 scripts/candle-op-tables.py [CANDLE_CORE_SRC_DIR] > crates/trace-ops/src/rules/generated.rs
    python3 scripts/candle-op-tables.py ops [CANDLE_CORE_SRC_DIR] > crates/trace-ops/src/rules/candle_ops.rs
The default source directory is the one cargo unpacked:
    ~/.cargo/registry/src/*/candle-core-0.11.1/src
`cargo test -p trace-ops` checks the committed table is well formed; re-run this script (and
review the diff) when the pinned Candle version changes.
"""

import glob
import os
import re
import sys

VERSION = "0.11.1"
OP_FILES = ["tensor.rs", "tensor_cat.rs", "conv.rs", "indexer.rs"]
# every op module of crates/trace-ops/src/rules/mod.rs OP_MODULES (candle-core's)
ALL_OP_FILES = ["tensor.rs", "tensor_cat.rs", "conv.rs", "indexer.rs", "custom_op.rs", "sort.rs"]
OP_MACROS = r"^\s*(?:unary_op|binary_op|binary_op_scalar|broadcast_binary_op)!\((\w+)\s*,"
TRAIT_MACRO = r"^\s*bin_trait!\(\w+\s*,\s*(\w+)\s*,"
NN_OP_FILES = ["ops.rs", "loss.rs", "rotary_emb.rs"]

# Op variant -> the op's name as Candle's public API spells it (the rest: snake case).
NAME_OVERRIDES = {
    "ToDType": "to_dtype",
    "ArgMin": "argmin",
    "ArgMax": "argmax",
}


def snake(name):
    if name in NAME_OVERRIDES:
        return NAME_OVERRIDES[name]
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i > 0 and (name[i - 1].islower()):
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def arm_name(pattern):
    """`Op::Binary(lhs, rhs, BinaryOp::Add)` -> `add`; several patterns joined with `|`."""
    names = []
    for alt in re.split(r"\|\s*&?Op::", pattern):
        alt = alt.strip().lstrip("&")
        if alt.startswith("Op::"):
            alt = alt[len("Op::"):]
        m = re.match(r"(\w+)", alt)
        if not m:
            continue
        variant = m.group(1)
        sub = re.search(r"(?:BinaryOp|UnaryOp|ReduceOp)::(\w+)", alt)
        if sub:
            n = snake(sub.group(1))
        else:
            n = snake(variant)
        if n not in names:
            names.append(n)
    return "|".join(names)


def backward_lines(src):
    lines = src.split("\n")
    start = next(i for i, l in enumerate(lines) if "pub fn backward(&self) -> Result<GradStore>" in l)
    # the function ends at the first line that closes it at its own indentation
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(i for i in range(start + 1, len(lines))
               if lines[i].strip() == "}" and len(lines[i]) - len(lines[i].lstrip()) == indent)
    match_line = next(i for i in range(start, end) if lines[i].strip() == "match op {")
    arm_indent = len(lines[match_line + 1]) - len(lines[match_line + 1].lstrip())
    match_end = next(i for i in range(match_line + 1, end)
                     if lines[i].strip() in ("};", "}")
                     and len(lines[i]) - len(lines[i].lstrip()) == arm_indent - 4)
    # the arms: where each begins and the op its pattern names
    arms = []  # (first line index, name)
    i = match_line + 1
    while i < match_end:
        text = lines[i]
        stripped = text.strip()
        ind = len(text) - len(text.lstrip())
        if ind == arm_indent and (stripped.startswith("Op::") or stripped.startswith("&Op::")):
            first, pattern = i, stripped
            while "=>" not in pattern and i + 1 < match_end:
                i += 1
                pattern += " " + lines[i].strip()
            arms.append((first, arm_name(pattern.split("=>")[0])))
        i += 1
    rows = []  # (line, kind, arm)
    for i in range(start + 1, end + 1):
        stripped = lines[i].strip()
        lineno = i + 1
        if match_line < i < match_end:
            arm = None
            for first, name in arms:
                if first <= i:
                    arm = name
            if arm is None:
                rows.append((lineno, "Driver", ""))
                continue
            if "grads.or_insert(" in stripped:
                kind = "AccumulateZeros"
            elif re.match(r"^\*\w+ = \w+\.(add|sub)\(", stripped):
                kind = "AccumulateAdd"
            else:
                kind = "Arm"
            rows.append((lineno, kind, arm))
        elif "self.sorted_nodes()" in stripped:
            rows.append((lineno, "SortNodes", ""))
        else:
            rows.append((lineno, "Driver", ""))
    # GradStore::or_insert: the zeros of a new accumulator
    gs = next(i for i, l in enumerate(lines) if "fn or_insert(&mut self, tensor: &Tensor)" in l)
    gs_end = next(i for i in range(gs + 1, len(lines)) if lines[i].strip() == "}"
                  and len(lines[i]) - len(lines[i].lstrip()) == len(lines[gs]) - len(lines[gs].lstrip()))
    return start + 1, end + 1, (gs + 1, gs_end + 1), rows


def statement_starts(src, start, end):
    """(line, first line of its statement) for the lines of `Tensor::backward` (1-based,
    `start`..=`end`) that continue a statement begun on an earlier line: a line whose previous
    code line does not end a statement or open or close a block (`;`, `{`, `}`)."""
    lines = src.split("\n")
    out = []
    first = None
    prev = ""
    for lineno in range(start, end + 1):
        code = lines[lineno - 1].split("//")[0].rstrip()
        if not code.strip():
            continue
        if first is not None and prev and prev[-1] not in ";{}":
            out.append((lineno, first))
        else:
            first = lineno
        prev = code
    return out


def helpers(src_dir):
    names = set()
    for f in OP_FILES:
        impls = []  # (indent, is a trait impl) of the enclosing impl blocks
        for text in open(os.path.join(src_dir, f)).read().split("\n"):
            stripped = text.strip()
            ind = len(text) - len(text.lstrip())
            if not stripped:
                continue
            # a block ends at the `}` at its own indentation (or at text further left)
            impls = [(i, t) for (i, t) in impls
                     if i < ind or (i == ind and not stripped.startswith("}"))]
            if stripped.startswith("impl") or re.match(r"^(pub\s+)?trait\s", stripped):
                # only inherent `impl Tensor` blocks hold Tensor's own helpers
                impls.append((ind, not stripped.startswith("impl Tensor {")))
                continue
            m = re.match(r"^(pub\(crate\)\s+)?(?:unsafe\s+)?fn\s+(\w+)", stripped)
            if not m:
                continue
            if any(t for (_, t) in impls):
                continue  # a trait method (`impl Add for Tensor`: the trait's op) or another type's
            names.add(m.group(2))
    return sorted(names)


def candle_ops(src_dir, nn_dir):
    """(name, provenance) of every public function and macro-made method of the op files."""
    seen = {}
    for f in ALL_OP_FILES:
        for n, text in enumerate(open(os.path.join(src_dir, f)).read().split("\n"), start=1):
            m = (re.match(r"^\s*pub\s+(?:unsafe\s+)?fn\s+(\w+)", text)
                 or re.match(OP_MACROS, text) or re.match(TRAIT_MACRO, text)
                 or re.match(r"^\s*fn\s+(i)\(", text))
            if m and m.group(1) not in seen:
                seen[m.group(1)] = f"candle-core-{VERSION}/src/{f}:{n}"
    for f in NN_OP_FILES:
        for n, text in enumerate(open(os.path.join(nn_dir, f)).read().split("\n"), start=1):
            m = re.match(r"^pub fn\s+(\w+)", text)
            if m and m.group(1) not in seen:
                seen[m.group(1)] = f"candle-nn-{VERSION}/src/{f}:{n}"
    return sorted(seen.items())


def nn_ops(nn_dir):
    names = set()
    for f in NN_OP_FILES:
        for m in re.finditer(r"^pub fn\s+(\w+)", open(os.path.join(nn_dir, f)).read(), re.M):
            names.add(m.group(1))
    return sorted(names)


def ops_main(src_dir):
    """The `ops` table (src/rules/candle_ops.rs): every op name with its provenance."""
    nn_dir = src_dir.replace(f"candle-core-{VERSION}", f"candle-nn-{VERSION}")
    out = []
    w = out.append
    w("// @generated by `scripts/candle-op-tables.py ops` from candle-core " + VERSION + "'s and candle-nn " + VERSION + "'s")
    w("// op files; do not edit by hand.")
    w("")
    w("//! Every op name of Candle " + VERSION + " (see `scripts/candle-op-tables.py`).")
    w("")
    w("/// Every op name candle-core " + VERSION + "'s op files (" + ", ".join("src/" + f for f in ALL_OP_FILES) + ")")
    w("/// and candle-nn's (" + ", ".join("src/" + f for f in NN_OP_FILES) + ") can put on a stack, with where it is")
    w("/// defined: their public functions and the methods their macros define. Accessors among them")
    w("/// are [`super::NOT_OPS`].")
    w("pub const CANDLE_OPS: &[(&str, &str)] = &[")
    for n, at in candle_ops(src_dir, nn_dir):
        w(f'    ("{n}", "{at}"),')
    w("];")
    print("\n".join(out))


def main():
    args = sys.argv[1:]
    ops = bool(args) and args[0] == "ops"
    if ops:
        args = args[1:]
    if args:
        src_dir = args[0]
    else:
        found = glob.glob(os.path.expanduser(f"~/.cargo/registry/src/*/candle-core-{VERSION}/src"))
        if not found:
            sys.exit(f"candle-core-{VERSION} sources not found under ~/.cargo/registry/src")
        src_dir = found[0]
    if ops:
        return ops_main(src_dir)
    src = open(os.path.join(src_dir, "backprop.rs")).read()
    start, end, (gs_start, gs_end), rows = backward_lines(src)
    out = []
    w = out.append
    w("// @generated by scripts/candle-op-tables.py from candle-core " + VERSION + "'s src/backprop.rs and")
    w("// op files (" + ", ".join("src/" + f for f in OP_FILES) + ") and candle-nn's; do not edit by hand.")
    w("")
    w("//! Tables generated from candle-core " + VERSION + "'s sources (see `scripts/candle-op-tables.py`).")
    w("")
    w("use super::line_kind::BackwardLine::{self, *};")
    w("")
    w("/// The Candle version the tables were generated from.")
    w(f'pub const CANDLE_VERSION: &str = "{VERSION}";')
    w("")
    w("/// First and last line (1-based, inclusive) of `Tensor::backward` in `src/backprop.rs`.")
    w(f"pub const BACKWARD_FN_LINES: (u32, u32) = ({start}, {end});")
    w("")
    w("/// First and last line (1-based, inclusive) of `GradStore::or_insert` in `src/backprop.rs`:")
    w("/// the zeros of a new gradient accumulator.")
    w(f"pub const OR_INSERT_FN_LINES: (u32, u32) = ({gs_start}, {gs_end});")
    w("")
    w("/// Every line of `Tensor::backward` after its signature, ascending: what a sample")
    w("/// stopped at that line does (the arm is the `match op` arm's op, e.g. `matmul`).")
    w("pub const BACKWARD_LINES: &[(u32, BackwardLine, &str)] = &[")
    for (line, kind, arm) in rows:
        w(f'    ({line}, {kind}, "{arm}"),')
    w("];")
    w("")
    w("/// The lines of `Tensor::backward` that continue a statement begun on an earlier line, with")
    w("/// that statement's first line, ascending: an arm runs its statements in order, so an")
    w("/// allocation at an earlier statement than the last one starts another execution of it.")
    w("pub const BACKWARD_STATEMENTS: &[(u32, u32)] = &[")
    for (line, first) in statement_starts(src, start, end):
        w(f"    ({line}, {first}),")
    w("];")
    w("")
    w("/// Functions of candle-core's op files that are not public API (`fn`, `pub(crate) fn`):")
    w("/// internal helpers, never an operation.")
    w("pub const HELPERS: &[&str] = &[")
    for n in helpers(src_dir):
        w(f'    "{n}",')
    w("];")
    w("")
    nn_dir = src_dir.replace(f"candle-core-{VERSION}", f"candle-nn-{VERSION}")
    w("/// The public free functions of candle-nn " + VERSION + "'s op files (" + ", ".join("src/" + f for f in NN_OP_FILES) + "):")
    w("/// operations.")
    w("pub const NN_OPS: &[&str] = &[")
    for n in nn_ops(nn_dir):
        w(f'    "{n}",')
    w("];")
    print("\n".join(out))


if __name__ == "__main__":
    main()

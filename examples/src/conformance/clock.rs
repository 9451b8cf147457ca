//! The Candle side of the conformance clock: each op of a family's training step timed alone
//! at the model's shapes, forward, backward and optimizer, `reps` times after a warm-up, with
//! [`std::time::Instant`] — no profiler, no probe, one thread (`RAYON_NUM_THREADS=1`).
//!
//! - **forward**: each op the model calls (what the trace's op frames name: `matmul`,
//!   `broadcast_add`, `layer_norm_slow`, `cross_entropy`, …) on tensors of the model's shapes.
//! - **backward**: each *arm* of candle-core's `Tensor::backward` the model's graph runs
//!   (`matmul.backward`, `broadcast.backward`, …): the arm's node is built alone from
//!   variables of the model's shapes and `node.backward()` is timed; the seed (`ones_like`
//!   of the node) and the gradient accumulation of its inputs (`zeros_like` then `add`, what
//!   `GradStore::or_insert` and the arm's `+=` do) are timed alone and subtracted, and the
//!   accumulation is reported as its own row, `grad_accumulate`. A composite (candle-nn's
//!   batch norm, `layer_norm_slow`, `softmax`) is split into the arms it makes, each timed so.
//! - **optimizer**: candle-nn 0.11.1's `AdamW::step`, op by op, per parameter.
//!
//! Each row keeps every repetition (ns), so several runs interleaved with the PyTorch clock can
//! be merged (`scripts/conformance/merge.py`).

use std::collections::HashMap;
use std::time::Instant;

use candle_core::{Result, Shape, Tensor, Var};

/// One timed op of one pass.
#[derive(Debug, Clone)]
pub struct Row {
    /// `forward`, `backward` or `optimizer`.
    pub pass: &'static str,
    /// The op as the trace names it (`matmul`, `matmul.backward`, `grad_accumulate`).
    pub op: String,
    /// What was timed (shapes), for people.
    pub what: String,
    /// How many times the model runs it (a GRU step's arms: once per time step).
    pub count: u32,
    /// One time per repetition, ns (a backward arm: its node's backward less the seed and the
    /// accumulation, each the median of its own repetitions).
    pub ns: Vec<i64>,
}

/// Times ops alone and collects the [`Row`]s.
#[derive(Debug)]
pub struct Clock {
    reps: usize,
    rows: Vec<Row>,
    acc: HashMap<Vec<usize>, i64>,
    seed: HashMap<Vec<usize>, i64>,
    /// Accumulation per repetition, summed over every arm (the `grad_accumulate` row).
    acc_total_ns: i64,
}

fn median(xs: &mut [i64]) -> i64 {
    xs.sort_unstable();
    xs.get(xs.len() / 2).copied().unwrap_or(0)
}

impl Clock {
    /// A clock of `reps` repetitions per op (after 3 unrecorded ones).
    pub fn new(reps: usize) -> Self {
        Self {
            reps: reps.max(1),
            rows: Vec::new(),
            acc: HashMap::new(),
            seed: HashMap::new(),
            acc_total_ns: 0,
        }
    }

    fn times(&self, mut f: impl FnMut() -> Result<()>) -> Result<Vec<i64>> {
        for _ in 0..3 {
            f()?;
        }
        let mut out = Vec::with_capacity(self.reps);
        for _ in 0..self.reps {
            let t = Instant::now();
            f()?;
            out.push(i64::try_from(t.elapsed().as_nanos()).unwrap_or(i64::MAX));
        }
        Ok(out)
    }

    /// Times `f` (one op of `pass`, named `op` as the trace names it) and records it.
    ///
    /// # Errors
    /// Candle errors from `f`.
    pub fn op(
        &mut self,
        pass: &'static str,
        op: &str,
        what: String,
        f: impl FnMut() -> Result<Tensor>,
    ) -> Result<()> {
        self.op_n(pass, op, what, 1, f)
    }

    /// [`Self::op`] for an op the step runs `count` times at these shapes (timed once).
    ///
    /// # Errors
    /// Candle errors from `f`.
    pub fn op_n(
        &mut self,
        pass: &'static str,
        op: &str,
        what: String,
        count: u32,
        mut f: impl FnMut() -> Result<Tensor>,
    ) -> Result<()> {
        let ns = self.times(|| f().map(drop))?;
        self.rows.push(Row {
            pass,
            op: op.to_string(),
            what,
            count,
            ns,
        });
        Ok(())
    }

    /// The median time of `zeros_like` then `add` on a tensor of `shape` (one accumulator).
    fn acc_ns(&mut self, t: &Tensor) -> Result<i64> {
        let key = t.dims().to_vec();
        if let Some(&ns) = self.acc.get(&key) {
            return Ok(ns);
        }
        let g = t.detach().ones_like()?;
        let mut ns = self.times(|| {
            let z = t.zeros_like()?;
            z.add(&g).map(drop)
        })?;
        let m = median(&mut ns);
        self.acc.insert(key, m);
        Ok(m)
    }

    /// The median time of the seed `ones_like()?.contiguous()` of a node of `t`'s shape.
    fn seed_ns(&mut self, t: &Tensor) -> Result<i64> {
        let key = t.dims().to_vec();
        if let Some(&ns) = self.seed.get(&key) {
            return Ok(ns);
        }
        let mut ns = self.times(|| t.ones_like()?.contiguous().map(drop))?;
        let m = median(&mut ns);
        self.seed.insert(key, m);
        Ok(m)
    }

    /// One backward arm `op` (`matmul.backward`): `node` builds one node from variables holding
    /// `inputs`' values (contiguous copies); its backward is timed, less the seed and the
    /// accumulation of each input. Returns `node` applied to `inputs` themselves (the model's
    /// forward value, for the next arm).
    ///
    /// # Errors
    /// Candle errors from `node`.
    pub fn arm(
        &mut self,
        op: &str,
        inputs: &[&Tensor],
        node: impl Fn(&[Tensor]) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let plain: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
        let out = node(&plain)?;
        let vars = inputs
            .iter()
            .map(|t| Var::from_tensor(&t.detach()).map(|v| v.as_tensor().clone()))
            .collect::<Result<Vec<_>>>()?;
        let y = node(&vars)?;
        let mut overhead = self.seed_ns(&y)?;
        let mut acc = 0;
        // every node but the root takes an accumulator (`or_insert`, then `+=`); a composite's
        // inner nodes too
        let nodes: Vec<Tensor> = y
            .sorted_nodes()
            .into_iter()
            .filter(|n| n.id() != y.id())
            .cloned()
            .collect();
        for n in &nodes {
            acc += self.acc_ns(n)?;
        }
        overhead += acc;
        self.acc_total_ns += acc;
        let ns = self
            .times(|| y.backward().map(drop))?
            .into_iter()
            .map(|t| t - overhead)
            .collect();
        let what = inputs
            .iter()
            .map(|t| format!("{:?}", t.dims()))
            .collect::<Vec<_>>()
            .join(" ");
        self.rows.push(Row {
            pass: "backward",
            op: op.to_string(),
            what,
            count: 1,
            ns,
        });
        Ok(out)
    }

    /// A view's arm (`transpose`, `permute`: the gradient is a strided view of the node's, added
    /// into the input's accumulator): the diff files all of it, the zeros and the strided
    /// `add`, as `grad_accumulate` (the arm's own line computes nothing), so its backward less
    /// the seed is added to the accumulation. Returns `view` of `input` itself.
    ///
    /// # Errors
    /// Candle errors from `view`.
    pub fn view_arm(
        &mut self,
        input: &Tensor,
        view: impl Fn(&Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let out = view(input)?;
        let var = Var::from_tensor(&input.detach())?;
        let y = view(var.as_tensor())?;
        let seed = self.seed_ns(&y)?;
        let mut ns = self.times(|| y.backward().map(drop))?;
        self.acc_total_ns += (median(&mut ns) - seed).max(0);
        Ok(out)
    }

    /// `lhs op rhs` with candle's broadcasting (`broadcast_add` …) as its arms: a
    /// `broadcast.backward` for each side whose shape differs from the result's, then the
    /// binary arm `binary.backward` (`add.backward`) on same-shaped operands.
    ///
    /// # Errors
    /// Candle errors (shapes that do not broadcast).
    pub fn broadcast_binary(
        &mut self,
        binary: &str,
        lhs: &Tensor,
        rhs: &Tensor,
        f: fn(&Tensor, &Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let shape: Shape = lhs
            .shape()
            .broadcast_shape_binary_op(rhs.shape(), "conformance")?;
        let mut sides = Vec::with_capacity(2);
        for t in [lhs, rhs] {
            if t.shape() == &shape {
                sides.push(t.clone());
            } else {
                let s = shape.clone();
                sides.push(self.arm("broadcast.backward", &[t], move |v| {
                    v[0].broadcast_as(s.clone())
                })?);
            }
        }
        self.arm(
            &format!("{binary}.backward"),
            &[&sides[0], &sides[1]],
            |v| f(&v[0], &v[1]),
        )
    }

    /// Multiplies the `count` of the rows from index `from` on by `count` (arms that run once
    /// per time step were timed once) and the accumulation they added.
    pub fn repeat_since(&mut self, from: usize, acc_before: i64, count: u32) {
        for r in self.rows.iter_mut().skip(from) {
            r.count = r.count.saturating_mul(count);
        }
        let added = self.acc_total_ns - acc_before;
        self.acc_total_ns = acc_before + added * i64::from(count);
    }

    /// The number of rows so far and the accumulation so far (for [`Self::repeat_since`]).
    pub fn mark(&self) -> (usize, i64) {
        (self.rows.len(), self.acc_total_ns)
    }

    /// Records the `grad_accumulate` row: the accumulation of every arm so far, per repetition
    /// the sum of the per-shape medians (its spread is the arms').
    pub fn finish_backward(&mut self) {
        self.rows.push(Row {
            pass: "backward",
            op: "grad_accumulate".into(),
            what: "zeros_like + add per arm input".into(),
            count: 1,
            ns: vec![self.acc_total_ns; self.reps],
        });
    }

    /// The rows, in the order they were timed.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// The rows as JSON: `{"side": "candle", "family", "reps", "rows": [{"pass", "op", "what",
    /// "ns": [...]}]}` (written by hand: the examples crate has no serde).
    pub fn to_json(&self, family: &str) -> String {
        let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let rows: Vec<String> = self
            .rows
            .iter()
            .map(|r| {
                let ns: Vec<String> = r.ns.iter().map(|n| n.to_string()).collect();
                format!(
                    "{{\"pass\": \"{}\", \"op\": \"{}\", \"what\": \"{}\", \"count\": {}, \"ns\": [{}]}}",
                    r.pass,
                    esc(&r.op),
                    esc(&r.what),
                    r.count,
                    ns.join(", ")
                )
            })
            .collect();
        format!(
            "{{\"side\": \"candle\", \"family\": \"{}\", \"reps\": {}, \"rows\": [\n{}\n]}}\n",
            esc(family),
            self.reps,
            rows.join(",\n")
        )
    }
}

pub use super::clock_ops::time_family;

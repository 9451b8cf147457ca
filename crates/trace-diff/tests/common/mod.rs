//! A small writer of training-step traces for the comparison tests.

#![allow(dead_code)]

use serde_json::{json, Value};
use trace_diff::{compare, DiffOptions, Run, TraceDiff};
use trace_graph::Analysis;
use trace_schema::TraceDocument;

/// A trace under construction: meta fields, body lines, and how it ends.
pub struct TraceText {
    pub meta: Value,
    starts: Vec<String>,
    body: Vec<String>,
    ends: Vec<String>,
    gradients: Vec<String>,
    end_ns: u64,
    /// `Some(reason)`: a failed terminal; `None`: complete.
    pub failed: Option<String>,
    /// No terminal at all (cut short).
    pub truncated: bool,
}

impl Default for TraceText {
    fn default() -> Self {
        Self::new()
    }
}

impl TraceText {
    /// A CPU, host-timed training trace with complete logical memory.
    pub fn new() -> Self {
        Self {
            meta: json!({
                "kind": "meta", "schema": trace_schema::WRITE_VERSION.as_str(), "run_id": "run-1",
                "entrypoint": "model::train_step", "phase": "train",
                "timestamp": "2026-01-01T00:00:00.000Z", "capture_step": 2, "warmup_steps": 1,
                "device": "cpu", "timing_mode": "host",
                "capture_contract": {"measurement_scope": "profiled_work", "logical_memory": "complete", "gradients": "partial"}
            }),
            starts: Vec::new(),
            body: Vec::new(),
            ends: Vec::new(),
            gradients: Vec::new(),
            end_ns: 0,
            failed: None,
            truncated: false,
        }
    }

    /// Sets a meta field.
    pub fn set(mut self, field: &str, value: Value) -> Self {
        self.meta[field] = value;
        self
    }

    /// A closed span `[start, start + duration)`.
    pub fn span(
        &mut self,
        id: &str,
        parent: Option<&str>,
        name: &str,
        start_ns: u64,
        duration_ns: u64,
        pass: Option<&str>,
    ) -> &mut Self {
        let mut v = json!({"kind": "span_start", "id": id, "name": name, "start_ns": start_ns,
            "span_kind": "function", "measured": parent.is_none()});
        if let Some(p) = parent {
            v["parent_id"] = json!(p);
        }
        if let Some(p) = pass {
            v["step"] = json!(p);
        }
        self.starts.push(v.to_string());
        self.ends
            .push(json!({"kind": "span_end", "id": id, "duration_ns": duration_ns}).to_string());
        self.end_ns = self.end_ns.max(start_ns + duration_ns);
        self
    }

    /// An allocation.
    pub fn alloc(
        &mut self,
        t: u64,
        storage: &str,
        bytes: u64,
        span: &str,
        category: &str,
        shape: &[u64],
    ) -> &mut Self {
        self.body.push(
            json!({"kind": "memory", "timestamp_ns": t, "action": "alloc", "device": "cpu",
                "storage_id": storage, "bytes": bytes, "span_id": span, "category": category,
                "shape": shape, "dtype": "f32", "source": "allocator"})
            .to_string(),
        );
        self
    }

    /// A pre-existing parameter.
    /// An `other` storage without a shape (a buffer whose size can differ run to run).
    pub fn untyped(&mut self, t: u64, storage: &str, bytes: u64, span: &str) -> &mut Self {
        self.body.push(
            json!({"kind": "memory", "timestamp_ns": t, "action": "alloc", "device": "cpu",
                "storage_id": storage, "bytes": bytes, "span_id": span, "category": "other",
                "dtype": "f32", "source": "allocator"})
            .to_string(),
        );
        self
    }

    pub fn parameter(&mut self, t: u64, storage: &str, bytes: u64, span: &str) -> &mut Self {
        self.body.push(
            json!({"kind": "memory", "timestamp_ns": t, "action": "alloc", "device": "cpu",
                "storage_id": storage, "bytes": bytes, "span_id": span, "category": "parameter",
                "shape": [bytes / 4], "dtype": "f32", "pre_existing": true, "label": storage})
            .to_string(),
        );
        self
    }

    /// A free.
    pub fn free(&mut self, t: u64, storage: &str, span: &str) -> &mut Self {
        self.body.push(
            json!({"kind": "memory", "timestamp_ns": t, "action": "free", "device": "cpu",
                "storage_id": storage, "span_id": span})
            .to_string(),
        );
        self
    }

    /// A parameter gradient fact (`norm` for present gradients).
    pub fn gradient(&mut self, key: &str, state: &str, norm: Option<f64>) -> &mut Self {
        let n = self.gradients.len() + 1;
        let mut v = json!({"kind": "gradient", "event_id": format!("gradient-{n}"),
            "root": "model", "key": key, "state": state});
        if let Some(norm) = norm {
            v["norm"] = json!(norm);
        }
        self.gradients.push(v.to_string());
        self
    }

    /// The JSONL text.
    pub fn text(&self) -> String {
        let mut lines = vec![self.meta.to_string()];
        lines.extend(self.starts.iter().cloned());
        lines.extend(self.body.iter().cloned());
        lines.extend(self.ends.iter().cloned());
        lines.extend(self.gradients.iter().cloned());
        if !self.truncated {
            lines.push(match &self.failed {
                Some(reason) => json!({"kind": "terminal", "outcome": "failed",
                    "timestamp_ns": self.end_ns, "reason": reason})
                .to_string(),
                None => json!({"kind": "terminal", "outcome": "complete",
                    "timestamp_ns": self.end_ns})
                .to_string(),
            });
        }
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }

    /// Loads and analyses it.
    pub fn load(&self) -> Loaded {
        Loaded::of(trace_schema::load_str(&self.text()).expect("a loadable trace"))
    }
}

/// A document and its analysis.
pub struct Loaded {
    pub doc: TraceDocument,
    pub analysis: Analysis,
}

impl Loaded {
    pub fn of(doc: TraceDocument) -> Self {
        let analysis = trace_graph::analyze(&doc);
        Self { doc, analysis }
    }

    pub fn run<'a>(&'a self, label: &'a str) -> Run<'a> {
        Run {
            doc: &self.doc,
            analysis: &self.analysis,
            label,
        }
    }
}

/// Compares one run with one run, default options.
pub fn diff(baseline: &Loaded, candidate: &Loaded) -> TraceDiff {
    compare(
        &[baseline.run("baseline.jsonl")],
        &[candidate.run("candidate.jsonl")],
        &DiffOptions::default(),
    )
    .expect("comparable inputs")
}

/// Compares several runs per side.
pub fn diff_many(baseline: &[Loaded], candidate: &[Loaded]) -> TraceDiff {
    let b: Vec<Run<'_>> = baseline.iter().map(|l| l.run("b")).collect();
    let c: Vec<Run<'_>> = candidate.iter().map(|l| l.run("c")).collect();
    compare(&b, &c, &DiffOptions::default()).expect("comparable inputs")
}

/// Options of [`mlp_step`].
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// Linear layers in the forward pass.
    pub layers: u64,
    /// Free the activations when backward ends (the fix) instead of after the optimizer.
    pub drop_loss_before_step: bool,
    /// The gradient of `layer{lost}.weight` is missing.
    pub lost_gradient: Option<u64>,
    /// The forward pass, and the gaps after forward and after backward, each take this much
    /// longer (a slower run), ns.
    pub slower_by_ns: u64,
    /// Rows of each activation (`[batch, 16] f32`: 1 KiB at the default 16); the parameters,
    /// gradients and optimizer state do not depend on it.
    pub batch: u64,
}

impl Default for Step {
    fn default() -> Self {
        Self {
            layers: 2,
            drop_loss_before_step: false,
            lost_gradient: None,
            slower_by_ns: 0,
            batch: 16,
        }
    }
}

/// A training step: root `step` (measured) → `forward` (→ `linear` per layer) → `backward` →
/// `optimizer`. Parameters 4 KiB per layer (pre-existing); each linear allocates a 1 KiB
/// activation, freed at the end of backward (the fix) or after the optimizer (retained);
/// backward allocates a 4 KiB gradient per layer (freed after the optimizer); the optimizer
/// allocates 8 KiB of state per layer (live at the end).
pub fn mlp_step(o: Step) -> TraceText {
    let mut t = TraceText::new();
    let s = o.slower_by_ns;
    let n = o.layers;
    let fwd_len = 10 * n + 10;
    let forward_end = 10 + fwd_len + s;
    let backward_end = forward_end + 30 + s;
    let optimizer_end = backward_end + 30 + s;
    let root_end = optimizer_end + 10;
    t.span("s1", None, "step", 0, root_end, None);
    t.span(
        "s2",
        Some("s1"),
        "forward",
        10,
        fwd_len + s,
        Some("forward"),
    );
    for l in 0..n {
        t.parameter(0, &format!("layer{l}.weight"), 4096, "s1");
    }
    for l in 0..n {
        let id = format!("s{}", 10 + l);
        let start = 15 + 10 * l;
        t.span(&id, Some("s2"), "linear", start, 5, None);
        t.alloc(
            start + 1,
            &format!("act{l}"),
            64 * o.batch,
            &id,
            "activation",
            &[o.batch, 16],
        );
    }
    t.span(
        "s3",
        Some("s1"),
        "backward",
        forward_end + 5,
        20,
        Some("backward"),
    );
    for l in 0..n {
        t.alloc(
            forward_end + 6 + l,
            &format!("grad{l}"),
            4096,
            "s3",
            "gradient",
            &[1024],
        );
    }
    let act_free = if o.drop_loss_before_step {
        forward_end + 24
    } else {
        optimizer_end + 2
    };
    let act_span = if o.drop_loss_before_step { "s3" } else { "s1" };
    for l in 0..n {
        t.free(act_free, &format!("act{l}"), act_span);
    }
    t.span(
        "s4",
        Some("s1"),
        "optimizer",
        backward_end + 5,
        20,
        Some("optimizer"),
    );
    for l in 0..n {
        t.alloc(
            backward_end + 6 + l,
            &format!("adam{l}"),
            8192,
            "s4",
            "optimizer",
            &[2048],
        );
    }
    for l in 0..n {
        t.free(optimizer_end + 3, &format!("grad{l}"), "s1");
    }
    for l in 0..n {
        let key = format!("layer{l}.weight");
        if o.lost_gradient == Some(l) {
            t.gradient(&key, "missing", None);
        } else {
            t.gradient(&key, "present", Some(1.0 + l as f64));
        }
    }
    t
}

/// The diff of a PyTorch trace `b` (the baseline) against a Candle trace `c`, with the default
/// options, each analysed once.
pub fn pytorch_vs_candle(b: &TraceDocument, c: &TraceDocument) -> TraceDiff {
    let (ab, ac) = (trace_graph::analyze(b), trace_graph::analyze(c));
    compare(
        &[Run {
            doc: b,
            analysis: &ab,
            label: "pytorch",
        }],
        &[Run {
            doc: c,
            analysis: &ac,
            label: "candle",
        }],
        &DiffOptions::default(),
    )
    .unwrap()
}

//! Where the gradient stops, and what the optimizer keeps for parameters it never updates.
//!
//! - [`gradient_cut`]: of the parameters without a gradient, the module where the gradient
//!   stops — the last module span of the forward pass named after the `VarBuilder` prefix of
//!   its parameters (`encoder.layer.11.output.LayerNorm`) whose parameters all got none — and,
//!   when the trace has allocation sites, the op inside it that has no backward in Candle
//!   ([`NO_BACKWARD_OPS`]: candle-nn's `LayerNorm`/`RmsNorm` forward on a contiguous input
//!   calls a fused custom op built with `apply_op*_no_bwd`).
//! - [`unused_state`]: the optimizer state kept for those parameters. When every state
//!   storage live at capture start names its parameter in its label (the probe ties AdamW's
//!   `m` and `v` to their parameter: `optimizer state · fc1.weight (m)`), the figure is the
//!   sum of those of the parameters without a gradient. Otherwise, when the state is exactly
//!   `k` times the parameters' bytes (`k` = 1 or 2: one moment per parameter for SGD with
//!   momentum, two for AdamW's `m` and `v`, each the parameter's size), the parameters without
//!   a gradient hold `k` × their bytes of it, never updated; any other ratio ties no state to
//!   a parameter and gives no figure.
//!
//! One pass over the spans and one over the memory events: O(spans + events log events).

use std::collections::{HashMap, HashSet};

use trace_memory::SpanIndex;
use trace_schema::labels::parse_optimizer_state_label;
use trace_schema::{MemoryAction, MemoryCategory, MemoryOrder, Pass, SpanKind, TraceDocument};

use crate::gradients::GradientSummary;

/// Candle ops without a backward (Candle 0.11.1): a gradient that reaches one stops there,
/// and every parameter before it gets none, with no error.
pub const NO_BACKWARD_OPS: &[&str] = &[
    "layer_norm",
    "rms_norm",
    "rope",
    "rope_i",
    "rope_thd",
    "softmax_last_dim",
];

/// Where the gradient stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GradientCut {
    /// The module span's name (its `VarBuilder` prefix).
    pub module: String,
    /// Its span id.
    pub span_id: String,
    /// An op without a backward that allocated inside it, from the allocation sites.
    pub op: Option<String>,
}

/// The key of a `root/key` parameter name.
fn key_of(name: &str) -> &str {
    name.split_once('/').map_or(name, |(_, k)| k)
}

/// The module prefix of a parameter key: `encoder.layer.0.output.LayerNorm.weight` →
/// `encoder.layer.0.output.LayerNorm`; `None` for a key without a `.`.
fn prefix_of(key: &str) -> Option<&str> {
    key.rsplit_once('.').map(|(p, _)| p)
}

/// The module where the gradient stops (see the module docs); `None` when no parameter lacks
/// one, or no forward module span is named after the prefix of parameters that all lack one.
pub fn gradient_cut(
    doc: &TraceDocument,
    spans: &SpanIndex,
    sites: Option<&trace_ops::SiteProfile>,
    g: &GradientSummary,
) -> Option<GradientCut> {
    if g.without_gradient.is_empty() {
        return None;
    }
    // prefixes whose parameters all lack a gradient
    let mut lacking: HashSet<&str> = HashSet::new();
    let mut trained: HashSet<&str> = HashSet::new();
    let without: HashSet<&str> = g.without_gradient.iter().map(|n| key_of(n)).collect();
    for p in &g.parameters {
        if let Some(prefix) = prefix_of(&p.key) {
            if without.contains(p.key.as_str()) {
                lacking.insert(prefix);
            } else {
                trained.insert(prefix);
            }
        }
    }
    lacking.retain(|p| !trained.contains(p));
    let cut = doc
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Module && lacking.contains(doc.str(s.name)))
        .filter(|s| spans.pass_of_id(doc, doc.str(s.id)) == Some(Pass::Forward))
        .max_by_key(|s| (s.start_ns, s.line))?;
    let module = doc.str(cut.name).to_string();
    let op = sites.and_then(|sites| {
        let mut found = None;
        doc.for_each_memory(MemoryOrder::File, |m| {
            if found.is_some() || m.action != MemoryAction::Alloc {
                return;
            }
            let Some(label) = sites.of_memory(m.index) else {
                return;
            };
            let inside = label
                .module
                .is_some_and(|x| x == module || x.ends_with(&format!("/{module}")));
            if inside && NO_BACKWARD_OPS.contains(&label.op) {
                found = Some(label.op.to_string());
            }
        });
        found
    });
    Some(GradientCut {
        span_id: doc.str(cut.id).to_string(),
        module,
        op,
    })
}

/// Optimizer state kept for parameters without a gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnusedState {
    /// Pieces of state per parameter (1 or 2 moments; 0 when they differ between parameters).
    pub moments: u64,
    /// Bytes of state the parameters without a gradient hold.
    pub bytes: u64,
    /// Those parameters, counted by their storages.
    pub parameters: u64,
    /// All optimizer state live at capture start, bytes.
    pub state_bytes: u64,
    /// The figure sums the state storages labelled with their parameter
    /// ([`trace_schema::labels`]); `false`: inferred from the 1x or 2x ratio.
    pub by_label: bool,
}

/// The optimizer state live at capture start and the parameters' bytes, by label.
#[derive(Debug, Default)]
struct StateAtStart {
    param_bytes: HashMap<String, u64>,
    state_bytes: u64,
    /// Bytes and slot count of the state tied to each parameter by its label.
    tied: HashMap<String, (u64, u64)>,
    /// State storages not tied to a parameter.
    untied: u64,
}

impl StateAtStart {
    fn read(doc: &TraceDocument) -> Self {
        let mut s = Self::default();
        doc.for_each_memory(MemoryOrder::Replay, |m| {
            if m.action != MemoryAction::Alloc || !m.pre_existing {
                return;
            }
            let b = m.bytes.unwrap_or(0);
            let label = m.label.map(|l| doc.str(l));
            match m.category {
                MemoryCategory::Parameter => {
                    if let Some(l) = label {
                        s.param_bytes.insert(l.to_string(), b);
                    }
                }
                MemoryCategory::Optimizer => {
                    s.state_bytes = s.state_bytes.saturating_add(b);
                    match label.and_then(parse_optimizer_state_label) {
                        Some(t) => {
                            let e = s.tied.entry(t.parameter.to_string()).or_default();
                            *e = (e.0.saturating_add(b), e.1 + 1);
                        }
                        None => s.untied += 1,
                    }
                }
                _ => {}
            }
        });
        s
    }
}

/// The optimizer state the parameters without a gradient hold (see the module docs): the
/// state storages labelled with one of them when every state storage names its parameter,
/// else `k` × their bytes when the state is exactly `k` = 1 or 2 times the parameters.
pub fn unused_state(doc: &TraceDocument, g: &GradientSummary) -> Option<UnusedState> {
    if g.without_gradient.is_empty() {
        return None;
    }
    let without: HashSet<&str> = g.without_gradient.iter().map(|n| key_of(n)).collect();
    let s = StateAtStart::read(doc);
    if s.state_bytes == 0 {
        return None;
    }
    if s.untied == 0 && !s.tied.is_empty() {
        let (mut parameters, mut bytes) = (0u64, 0u64);
        let mut slots: HashSet<u64> = HashSet::new();
        for (k, (b, n)) in &s.tied {
            if without.contains(k.as_str()) {
                parameters += 1;
                bytes = bytes.checked_add(*b)?;
                slots.insert(*n);
            }
        }
        let moments = match slots.len() {
            1 => slots.into_iter().next().unwrap_or(0),
            _ => 0,
        };
        return (bytes > 0).then_some(UnusedState {
            moments,
            bytes,
            parameters,
            state_bytes: s.state_bytes,
            by_label: true,
        });
    }
    let all = s
        .param_bytes
        .values()
        .try_fold(0u64, |a, b| a.checked_add(*b))?;
    if all == 0 || s.state_bytes % all != 0 {
        return None;
    }
    let moments = s.state_bytes / all;
    if !(1..=2).contains(&moments) {
        return None;
    }
    let (mut parameters, mut bytes) = (0u64, 0u64);
    for (k, b) in &s.param_bytes {
        if without.contains(k.as_str()) {
            parameters += 1;
            bytes = bytes.checked_add(b.checked_mul(moments)?)?;
        }
    }
    (bytes > 0).then_some(UnusedState {
        moments,
        bytes,
        parameters,
        state_bytes: s.state_bytes,
        by_label: false,
    })
}

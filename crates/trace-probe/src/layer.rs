//! [`ProbeLayer`]: a `tracing_subscriber::Layer` that turns `tracing` spans entered inside the
//! captured step into `module` trace spans — module spans from the model itself
//! (candle-transformers creates TRACE-level spans such as `attn`, `mlp`, `linear`).
//!
//! # Install it before the model is built
//! candle-transformers creates its spans **when the model is constructed** and only enters them
//! in `forward`. A span created while no subscriber was interested is disabled for good, so the
//! layer must be installed (globally, or with `tracing::subscriber::set_default` on the thread)
//! **before** `Model::load`. And since the spans are `TRACE`, filter per layer: a global
//! `EnvFilter` at `info` would disable them for every layer.
//!
//! ```
//! use tracing_subscriber::{filter::LevelFilter, layer::SubscriberExt, Layer, Registry};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let session = trace_probe::TraceSession::new(trace_probe::ProfileRun::inference("bert", 1), std::io::sink())?;
//! let subscriber = Registry::default().with(session.layer().with_filter(LevelFilter::TRACE));
//! let _guard = tracing::subscriber::set_default(subscriber);
//! // ... now build the model, then run the loop ...
//! # Ok(()) }
//! ```
//!
//! # Names from the `VarBuilder`
//! A span created with a `module` field (the probed constructors of [`crate::nn`]) is named
//! after it. One without is named from the parameters the run's `VarMap`
//! ([`crate::ProfileRun::varmap`]) gained since the previous new span, its tracing name then
//! becoming its module kind:
//! - a layer (candle-transformers' `linear`, `embedding`, `layer-norm`, `rms-norm`, `conv*`
//!   spans, [`LEAF_KINDS`], created right after the layer's parameters) after the owner of
//!   the newest of them: `encoder.layer.1.attention.self.query` for its `.weight` and `.bias`
//!   (parameters of a layer without a span, made before it, are not its own);
//! - any other span after the `VarBuilder` prefix they all share, when they share one;
//! - a span with no new parameters (a block around layers built before it, or one built
//!   before its layers, as llama's decoder block) is named after its first call made before
//!   the capture: after the dotted prefix shared by the names of the named module spans that
//!   ran directly inside it, when there are two or more of them and they share one
//!   (`encoder.layer.1` around `encoder.layer.1.attention` and `encoder.layer.1.output`;
//!   `model.layers.1` around llama's norms, attention and MLP). A block with one named layer
//!   inside (its prefix could be the layer's own or its parent's), or none, or first called
//!   inside the capture keeps its tracing name, told apart by call order (`layer#2`).
//!
//! One look at the map's length per new span; its keys are read only when it grew; a span
//! created while the map is locked is left unnamed.
//!
//! Each enter/exit inside the captured step becomes one trace span (unique id, kind `module`)
//! whose parent is the innermost open span on that thread — a probe span or an enclosing
//! tracing span — so the trace keeps exactly one root. It records the module path (names of the
//! enclosing module spans joined by `/`) and the tracing span id as instance key. Outside the
//! captured step an enter costs one atomic load, an exit three; before the capture, while some
//! block still waits for its first call, an exit also looks the span and its enclosing one up.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tracing::span::Id;
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::session::open_span::OpenSpan;
use crate::session::plugin::thread_key;
use crate::session::TraceSession;

/// The `tracing` layer of a session (see the module docs).
#[derive(Debug, Clone)]
pub struct ProbeLayer {
    session: TraceSession,
    /// Trace spans opened by this layer and not yet closed.
    open: Arc<AtomicUsize>,
    /// The run's `VarMap` keys seen when the last span was created.
    seen: Arc<Mutex<HashSet<String>>>,
    /// Block spans waiting for their first call to be named ([`Learning`]); 0 for good once
    /// the capture started ([`ProbeLayer::frozen`]).
    learning: Arc<AtomicUsize>,
    /// The capture started: names no longer change.
    frozen: Arc<AtomicBool>,
}

/// A block span waiting for its first call: the names of the named module spans that exited
/// directly inside it so far.
#[derive(Debug, Default)]
struct Learning(Vec<String>);

/// The name of a block from the names of the layers that ran directly inside it: their shared
/// dotted prefix, when there are two or more and they share one.
fn block_name(children: &[String]) -> Option<String> {
    if children.len() < 2 {
        return None;
    }
    let mut common: Vec<&str> = children[0].split('.').collect();
    for c in &children[1..] {
        let n = common
            .iter()
            .zip(c.split('.'))
            .take_while(|(a, b)| *a == b)
            .count();
        common.truncate(n);
    }
    (!common.is_empty()).then(|| common.join("."))
}

/// The `VarBuilder` prefix of parameter keys: the dotted path they share, their own last
/// segment (`weight`, `bias`) left out; `None` when they share none.
fn shared_prefix<'a>(keys: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut common: Option<Vec<&str>> = None;
    for key in keys {
        let segments: Vec<&str> = key.split('.').collect();
        let owner = &segments[..segments.len().saturating_sub(1)];
        common = Some(match common {
            None => owner.to_vec(),
            Some(c) => c
                .iter()
                .zip(owner)
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| *a)
                .collect(),
        });
    }
    common.filter(|c| !c.is_empty()).map(|c| c.join("."))
}

/// Tracing span names of single layers (the probe's and candle-transformers' `with_tracing`
/// names): named after the owner of their newest parameter.
pub(crate) const LEAF_KINDS: &[&str] = &[
    "linear",
    "embedding",
    "layer-norm",
    "rms-norm",
    "group-norm",
    "batch-norm",
    "conv1d",
    "conv2d",
    "conv-transpose1d",
    "conv-transpose2d",
    "qmatmul",
];

impl ProbeLayer {
    /// The name of a span of tracing name `kind` from the parameters the run's `VarMap` gained
    /// since the last call (see the module docs).
    fn new_parameters_prefix(&self, kind: &str) -> Option<String> {
        let varmap = &self.session.run().parameters.as_ref()?.varmap;
        // never wait for the map: a span created while its owner holds it is left unnamed
        let data = match varmap.data().try_lock() {
            Ok(d) => d,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if data.len() == seen.len() {
            return None;
        }
        let mut new: Vec<(u64, &str)> = data
            .iter()
            .filter(|(k, _)| !seen.contains(k.as_str()))
            .map(|(k, v)| {
                (
                    crate::tensor_id::tensor_number(v.as_tensor().id()),
                    k.as_str(),
                )
            })
            .collect();
        // creation order: Candle's tensor ids count up
        new.sort_unstable();
        let name = if LEAF_KINDS.contains(&kind) {
            new.last().and_then(|(_, k)| shared_prefix([*k]))
        } else {
            shared_prefix(new.iter().map(|(_, k)| *k))
        };
        seen.extend(new.into_iter().map(|(_, k)| k.to_string()));
        name
    }

    /// One fewer block waiting (never below 0: the capture may have set it to 0).
    fn learned_one(&self) {
        let _ = self
            .learning
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Before the capture: span `id` exited. A block waiting for its first call is named from
    /// what ran inside it; a named span tells the block it ran in.
    fn learn<S>(&self, id: &Id, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let name = {
            let mut extensions = span.extensions_mut();
            match extensions.remove::<Learning>() {
                Some(Learning(children)) => {
                    self.learned_one();
                    let name = block_name(&children);
                    if let Some(n) = &name {
                        extensions.insert(ModuleName(n.clone()));
                    }
                    name
                }
                None => extensions.get_mut::<ModuleName>().map(|n| n.0.clone()),
            }
        };
        let (Some(name), Some(outer)) = (name, ctx.lookup_current()) else {
            return;
        };
        let mut extensions = outer.extensions_mut();
        if let Some(Learning(children)) = extensions.get_mut::<Learning>() {
            if !children.contains(&name) {
                children.push(name);
            }
        }
    }
}

/// The instance name a span carries in its `module` field (the probed constructors record
/// their `VarBuilder` path there): the trace span is named after it, and the tracing span's
/// own name becomes the module kind.
#[derive(Debug)]
struct ModuleName(String);

/// Reads the `module` field of a new span.
struct ModuleField(Option<String>);

impl tracing::field::Visit for ModuleField {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "module" {
            self.0 = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "module" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

/// Per-span data kept in the tracing span's extensions: the trace spans opened by its enters
/// (several when it is entered on several threads or re-entered).
#[derive(Debug, Default)]
struct OpenEnters(Vec<(u64, OpenSpan)>);

impl TraceSession {
    /// The `tracing` layer feeding this session (install it before building the model; see
    /// [`ProbeLayer`]).
    pub fn layer(&self) -> ProbeLayer {
        ProbeLayer {
            session: self.clone(),
            open: Arc::new(AtomicUsize::new(0)),
            seen: Arc::default(),
            learning: Arc::new(AtomicUsize::new(0)),
            frozen: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl<S> Layer<S> for ProbeLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &tracing::span::Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let named = if attrs.metadata().fields().field("module").is_some() {
            let mut field = ModuleField(None);
            attrs.record(&mut field);
            // the probed constructors' parameters are the map's too: seen, not named again
            let _ = self.new_parameters_prefix(attrs.metadata().name());
            field.0.filter(|n| !n.is_empty())
        } else {
            self.new_parameters_prefix(attrs.metadata().name())
        };
        let kind = attrs.metadata().name();
        let Some(span) = ctx.span(id) else {
            return;
        };
        match named {
            Some(name) => span.extensions_mut().insert(ModuleName(name)),
            None if !LEAF_KINDS.contains(&kind) && !self.frozen.load(Ordering::Relaxed) => {
                span.extensions_mut().insert(Learning::default());
                self.learning.fetch_add(1, Ordering::Relaxed);
            }
            None => {}
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if self.learning.load(Ordering::Relaxed) == 0 {
            return;
        }
        if let Some(span) = ctx.span(&id) {
            if span.extensions_mut().remove::<Learning>().is_some() {
                self.learned_one();
            }
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.session.is_capturing() {
            return;
        }
        if !self.frozen.load(Ordering::Relaxed) {
            // names are fixed from here on: a block not yet called keeps its tracing name
            self.frozen.store(true, Ordering::Relaxed);
            self.learning.store(0, Ordering::Relaxed);
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let kind = span.metadata().name();
        let instance = span.extensions().get::<ModuleName>().map(|n| n.0.clone());
        let (name, module_kind) = match &instance {
            Some(name) => (name.as_str(), Some(kind)),
            None => (kind, None),
        };
        let inner = self.session.cur();
        let name = inner.module_instance_name(name, id.into_u64());
        let name = name.as_str();
        let Some(open) = inner.open_module_span_raw(name, module_kind, Some(id.into_u64())) else {
            return;
        };
        for plugin in &inner.plugins {
            plugin.on_module_enter(id.into_u64(), open.id, name, module_kind);
        }
        self.open.fetch_add(1, Ordering::Relaxed);
        let mut extensions = span.extensions_mut();
        let entry = (thread_key(), open);
        match extensions.get_mut::<OpenEnters>() {
            Some(enters) => enters.0.push(entry),
            None => extensions.insert(OpenEnters(vec![entry])),
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.session.is_capturing() && self.open.load(Ordering::Relaxed) == 0 {
            if self.learning.load(Ordering::Relaxed) != 0 {
                self.learn(id, &ctx);
            }
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let thread = thread_key();
        let open = {
            let mut extensions = span.extensions_mut();
            extensions.get_mut::<OpenEnters>().and_then(|enters| {
                let pos = enters.0.iter().rposition(|(t, _)| *t == thread)?;
                Some(enters.0.remove(pos).1)
            })
        };
        if let Some(open) = open {
            self.open.fetch_sub(1, Ordering::Relaxed);
            let inner = self.session.cur();
            crate::backward::forward_call_exited(inner.uid, open.id);
            inner.end_span(open.id, open.start_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{block_name, shared_prefix};

    #[test]
    fn a_block_is_named_after_the_prefix_its_layers_share() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            block_name(&names(&[
                "model.layers.1.input_layernorm",
                "model.layers.1.self_attn",
                "model.layers.1.mlp",
            ]))
            .as_deref(),
            Some("model.layers.1")
        );
        // segments, not characters: layers.1 and layers.10 share `layers`
        assert_eq!(
            block_name(&names(&["enc.layers.1", "enc.layers.10"])).as_deref(),
            Some("enc.layers")
        );
        // one layer: its prefix could be the layer's own or its parent's; nothing shared
        assert_eq!(block_name(&names(&["enc.intermediate.dense"])), None);
        assert_eq!(block_name(&names(&["embeddings", "encoder.layer"])), None);
        assert_eq!(block_name(&[]), None);
    }

    #[test]
    fn the_prefix_is_the_path_the_keys_share() {
        let q = [
            "encoder.layer.1.attention.self.query.weight",
            "encoder.layer.1.attention.self.query.bias",
        ];
        assert_eq!(
            shared_prefix(q).as_deref(),
            Some("encoder.layer.1.attention.self.query")
        );
        // one key: its owner
        assert_eq!(shared_prefix(["fc1.weight"]).as_deref(), Some("fc1"));
        // keys of two layers share their parent
        assert_eq!(
            shared_prefix(["enc.a.weight", "enc.b.weight"]).as_deref(),
            Some("enc")
        );
        // nothing shared, a root key, no keys: no name
        assert_eq!(shared_prefix(["a.weight", "b.weight"]), None);
        assert_eq!(shared_prefix(["weight"]), None);
        assert_eq!(shared_prefix([]), None);
    }
}

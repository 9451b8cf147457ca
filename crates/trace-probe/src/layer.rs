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
//! Each enter/exit inside the captured step becomes one trace span (unique id, kind `module`)
//! whose parent is the innermost open span on that thread — a probe span or an enclosing
//! tracing span — so the trace keeps exactly one root. It records the module path (names of the
//! enclosing module spans joined by `/`) and the tracing span id as instance key. Outside the
//! captured step an enter costs one atomic load, an exit two.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tracing::span::Id;
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::plugin::thread_key;
use crate::session::{OpenSpan, TraceSession};

/// The `tracing` layer of a session (see the module docs).
#[derive(Debug, Clone)]
pub struct ProbeLayer {
    session: TraceSession,
    /// Trace spans opened by this layer and not yet closed.
    open: Arc<AtomicUsize>,
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
        }
    }
}

impl<S> Layer<S> for ProbeLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &tracing::span::Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().fields().field("module").is_none() {
            return;
        }
        let mut field = ModuleField(None);
        attrs.record(&mut field);
        if let (Some(name), Some(span)) = (field.0.filter(|n| !n.is_empty()), ctx.span(id)) {
            span.extensions_mut().insert(ModuleName(name));
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.session.is_capturing() {
            return;
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
        let name = self.session.inner.module_instance_name(name, id.into_u64());
        let name = name.as_str();
        let Some(open) =
            self.session
                .inner
                .open_module_span_raw(name, module_kind, Some(id.into_u64()))
        else {
            return;
        };
        self.session.inner.backward.forward_call_entered(
            &self.session.inner,
            id.into_u64(),
            open.id,
            name,
            module_kind,
        );
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
            crate::backward::forward_call_exited(self.session.inner.uid, open.id);
            self.session.inner.end_span(open.id, open.start_ns);
        }
    }
}

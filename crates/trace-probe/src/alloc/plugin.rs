//! The session plug-in: joins the storage capture and device samples to a
//! [`crate::TraceSession`] through its capture hooks.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use candle_core::backprop::GradStore;
use candle_core::{Device, Tensor, TensorId, Var};
use trace_schema::{
    CategorySource, CoverageLevel, DroppedEventsEvent, ExecutionStep, MemoryCategory, RunMeta,
    TraceEvent,
};

use super::capture::{self, Attribution, CaptureSummary};
use crate::capture::{CaptureContext, CaptureHook, SpanInfo};
use crate::registry::RegisterAs;

/// Reason written when logical memory is not captured in deterministic mode.
const DETERMINISTIC_REASON: &str =
    "deterministic mode: storage ids derive from addresses, so the allocator capture is off";

/// The allocator and device-sample plug-in of one session.
pub(crate) struct StoragePlugin {
    device: Device,
    device_label: String,
    deterministic: bool,
    /// The window was opened by this session.
    active: AtomicBool,
    /// Ring drops before the window opened.
    dropped_at_start: AtomicU64,
    /// Parameter names and tensor ids (from `ProbedOptimizer`), for gradient labels.
    params: Mutex<Vec<(String, TensorId)>>,
    /// The last window's figures.
    summary: Mutex<Option<CaptureSummary>>,
}

impl StoragePlugin {
    pub(crate) fn new(device: &Device, device_label: &str, deterministic: bool) -> Self {
        Self {
            device: device.clone(),
            device_label: device_label.to_string(),
            deterministic,
            active: AtomicBool::new(false),
            dropped_at_start: AtomicU64::new(0),
            params: Mutex::new(Vec::new()),
            summary: Mutex::new(None),
        }
    }

    fn sample(&self, ctx: &CaptureContext<'_>) {
        // Deterministic mode writes identical bytes for identical runs: RSS and heap figures
        // are not reproducible, so no samples (the contract's physical_memory says none).
        if self.deterministic {
            return;
        }
        let ev = crate::device_mem::sample(&self.device, &self.device_label, ctx.clock().now_ns());
        if !ev.is_empty() {
            ctx.emit(TraceEvent::DeviceMemory(ev));
        }
    }

    fn drain(&self, ctx: &CaptureContext<'_>) {
        if !self.active.load(Ordering::Relaxed) {
            return;
        }
        let events = capture::lock().drain(&Ctx(ctx));
        for e in events {
            ctx.emit(TraceEvent::Memory(e));
        }
    }
}

/// [`Attribution`] through a session's capture context.
struct Ctx<'a, 'b>(&'a CaptureContext<'b>);

impl Attribution for Ctx<'_, '_> {
    fn session_ns(&self, hook_ns: u64) -> u64 {
        self.0.clock().process_ns_to_session_ns(hook_ns)
    }

    fn span_at(&self, thread: u64, ts_ns: u64) -> (Option<String>, Option<ExecutionStep>) {
        let span = self.0.span_at(thread, ts_ns).unwrap_or(self.0.root_span());
        let step = self.0.span_info(span).and_then(|i| i.step);
        (Some(self.0.span_id(span)), step)
    }
}

impl CaptureHook for StoragePlugin {
    fn on_meta(&self, meta: &mut RunMeta) {
        meta.tracking_allocator_installed = Some(super::is_installed());
        let contract = meta.capture_contract.get_or_insert_with(Default::default);
        let (level, reason) = if self.deterministic {
            (CoverageLevel::None, Some(DETERMINISTIC_REASON.to_string()))
        } else {
            capture::logical_memory_contract(&self.device_label)
        };
        contract.logical_memory = level;
        match reason {
            Some(r) => {
                contract.reasons.insert("logical_memory".into(), r);
            }
            None => {
                contract.reasons.remove("logical_memory");
            }
        }
        if contract.physical_memory == CoverageLevel::None && !self.deterministic {
            let observable = match &self.device {
                Device::Cpu => crate::device_mem::resident_bytes().is_some(),
                Device::Cuda(_) => cfg!(feature = "cuda"),
                Device::Metal(_) => cfg!(feature = "metal"),
            };
            if observable {
                contract.physical_memory = CoverageLevel::Partial;
                contract.reasons.insert(
                    "physical_memory".into(),
                    "device samples at capture start and span ends only".into(),
                );
            }
        }
    }

    fn around_optimizer_construction(&self, construct: &mut dyn FnMut()) {
        if self.deterministic || !matches!(self.device, Device::Cpu) {
            return construct();
        }
        let mut st = capture::lock();
        let ((), found) =
            st.capture_construction("optimizer state", MemoryCategory::Optimizer, construct);
        if found.is_none() && super::is_installed() && super::calibrate().is_ok() {
            st.declare_unknown_pre_existing(
                "the optimizer state allocated during construction could not be observed",
            );
        }
    }

    fn on_parameters(&self, params: &[(String, Var)]) {
        if self.deterministic {
            return;
        }
        let mut st = capture::lock();
        let mut names = self.params.lock().unwrap_or_else(|e| e.into_inner());
        names.clear();
        for (name, var) in params {
            names.push((name.clone(), var.as_tensor().id()));
            st.register(
                var.as_tensor(),
                RegisterAs::category(MemoryCategory::Parameter).label(name.clone()),
            );
        }
    }

    fn on_capture_start(&self, ctx: &CaptureContext<'_>) {
        self.sample(ctx);
        if self.deterministic {
            return;
        }
        self.dropped_at_start
            .store(super::dropped_events(), Ordering::Relaxed);
        let opened = capture::lock().begin(&self.device_label, ctx.clock().now_ns());
        // Without a window (registration-only mode) the pre-existing storages are still written.
        self.active.store(true, Ordering::Relaxed);
        self.drain(ctx);
        self.active.store(opened, Ordering::Relaxed);
    }

    fn on_loss(&self, _ctx: &CaptureContext<'_>, loss: &Tensor) {
        if self.active.load(Ordering::Relaxed) {
            capture::lock().register_graph(loss);
        }
    }

    fn on_gradients(&self, _ctx: &CaptureContext<'_>, grads: &GradStore) {
        if self.active.load(Ordering::Relaxed) {
            let names = self.params.lock().unwrap_or_else(|e| e.into_inner());
            capture::lock().register_grads(grads, &names);
        }
    }

    fn on_span_end(&self, ctx: &CaptureContext<'_>, _span: &SpanInfo) {
        self.sample(ctx);
        self.drain(ctx);
    }

    fn on_capture_end(&self, ctx: &CaptureContext<'_>) {
        self.sample(ctx);
        if !self.active.swap(false, Ordering::Relaxed) {
            return;
        }
        let (events, summary) = capture::lock().end(&Ctx(ctx));
        for e in events {
            ctx.emit(TraceEvent::Memory(e));
        }
        let dropped = summary
            .dropped_events
            .saturating_sub(self.dropped_at_start.load(Ordering::Relaxed));
        if dropped > 0 {
            ctx.emit(TraceEvent::DroppedEvents(DroppedEventsEvent {
                timestamp_ns: ctx.clock().now_ns(),
                dropped_events: dropped,
            }));
        }
        *self.summary.lock().unwrap_or_else(|e| e.into_inner()) = Some(summary);
    }

    fn on_finish(&self, _ctx: &CaptureContext<'_>) -> Option<u64> {
        let summary = self.summary.lock().unwrap_or_else(|e| e.into_inner());
        summary.as_ref().map(|s| {
            s.dropped_events
                .saturating_sub(self.dropped_at_start.load(Ordering::Relaxed))
        })
    }

    fn storage_id(&self, tensor: &Tensor, label: &str, category: MemoryCategory) -> Option<String> {
        if self.deterministic {
            return None;
        }
        let mut st = capture::lock();
        let what = RegisterAs {
            label: (!label.trim().is_empty()).then(|| label.to_string()),
            category,
            category_source: CategorySource::Declared,
        };
        let tag = st.register(tensor, what).tag();
        st.registry().get(tag).map(|e| e.storage_id.clone())
    }
}

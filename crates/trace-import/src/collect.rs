//! First pass: each raw Chrome event becomes a host span, a GPU interval, a memory event, a
//! thread name or a flow count — or a counted reason why not.

use std::collections::{BTreeMap, HashMap};

use serde_json::value::RawValue;
use trace_schema::SpanKind;

use crate::chrome::{Key, RawEvent};
use crate::report::ImportReport;
use crate::time::{micros_to_ns, NumberError};

/// Where a host span came from (decides its kind and the pass rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostCat {
    /// `cpu_op` (Kineto ≥ 1.x; `Operator` in older traces).
    CpuOp,
    /// `cuda_runtime`, `cuda_driver` and the other runtimes: host API calls.
    Runtime,
    /// `user_annotation`: `record_function` ranges, `ProfilerStep#N`, `Optimizer.step#…`.
    UserAnnotation,
    /// `python_function` (with_stack).
    PythonFunction,
    /// Any other category on a host thread.
    Other,
}

/// What a node of the span tree is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeClass {
    /// The measured root: the profiler window.
    Root,
    /// One host thread (only when the trace has several).
    Thread,
    /// A `backward` span grouping a run of autograd ops.
    Derived,
    /// A span read from an `X` event.
    Host(HostCat),
}

/// A span of the tree being built. Times are absolute nanoseconds of the trace's clock.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub name: String,
    pub kind: SpanKind,
    pub class: NodeClass,
    pub thread: Option<u32>,
    pub start: i128,
    pub end: i128,
    /// Index in `traceEvents` (ties in nesting order).
    pub file: u32,
    pub external_id: Option<i128>,
    pub correlation: Option<i128>,
    pub parent: Option<u32>,
    pub step: Option<trace_schema::Pass>,
    pub module_path: Option<String>,
}

/// A `[memory]` instant event.
#[derive(Debug, Clone)]
pub(crate) struct Mem {
    pub ts: i128,
    /// The `pid` of the process that wrote it (PyTorch's counters are per process).
    pub process: Option<String>,
    pub file: u32,
    pub thread: Option<u32>,
    pub device: String,
    pub is_cpu: bool,
    pub addr: u64,
    /// > 0 alloc, < 0 free.
    pub bytes: i128,
    pub total_allocated: Option<i128>,
    pub total_reserved: Option<i128>,
}

/// A GPU activity (`kernel`, `gpu_memcpy`, `gpu_memset`, `gpu_user_annotation`).
#[derive(Debug, Clone)]
pub(crate) struct Gpu {
    pub start: i128,
    pub end: i128,
    pub device: String,
    pub stream: String,
    pub category: String,
    pub correlation: Option<i128>,
    pub external_id: Option<i128>,
}

/// A host thread: `(pid, tid)` and its name from `thread_name` metadata.
#[derive(Debug, Clone)]
pub(crate) struct Thread {
    pub pid: Key,
    pub tid: Key,
    pub name: Option<String>,
}

impl Thread {
    /// `thread_name` metadata, else `thread <tid>`.
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None => format!("thread {}", self.tid),
        }
    }

    /// The autograd engine's worker threads are named `pt_autograd_<device>` by PyTorch.
    pub fn is_autograd(&self) -> bool {
        self.name
            .as_deref()
            .is_some_and(|n| n.contains("pt_autograd"))
    }
}

/// Everything the first pass keeps.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub nodes: Vec<Node>,
    pub mems: Vec<Mem>,
    pub gpus: Vec<Gpu>,
    pub threads: Vec<Thread>,
    /// The `Trace` category span Kineto writes for the profiler window.
    pub window: Option<(i128, i128)>,
    /// Flow (category, id) → (starts, finishes).
    pub flows: BTreeMap<(String, Key), (u64, u64)>,
}

/// `c10::DeviceType` and index → candle-graph device label (`cpu`, `cuda:0`, …). Source:
/// `c10/core/DeviceType.h` (0 CPU, 1 CUDA, 6 HIP, 11 Metal, 12 XPU, 13 MPS, 20 PrivateUse1).
pub(crate) fn device_label(device_type: i128, device_id: Option<i128>) -> (String, bool) {
    let indexed = |name: &str| match device_id {
        Some(i) if i >= 0 => format!("{name}:{i}"),
        _ => name.to_string(),
    };
    match device_type {
        0 => ("cpu".to_string(), true),
        1 => (indexed("cuda"), false),
        6 => (indexed("hip"), false),
        11 => (indexed("metal"), false),
        12 => (indexed("xpu"), false),
        13 => (indexed("mps"), false),
        20 => (indexed("privateuseone"), false),
        other => (indexed(&format!("device-type-{other}")), false),
    }
}

/// GPU activity categories (lower case). Kineto ≥ 2.0 names, and the older capitalised ones.
const GPU_CATEGORIES: &[&str] = &[
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "gpu_user_annotation",
    "memcpy",
    "memset",
];

/// Host runtime categories (lower case).
const RUNTIME_CATEGORIES: &[&str] = &[
    "cuda_runtime",
    "cuda_driver",
    "runtime",
    "driver",
    "xpu_runtime",
    "privateuse1_runtime",
    "privateuse1_driver",
    "mtia_runtime",
];

/// Chrome phases the import reads: `X`, `i`/`I`, `M`, `s`/`t`/`f`. These others are known to
/// the format but carry nothing the import maps (or, like `B`/`E`, are not written by Kineto).
const OTHER_KNOWN_PHASES: &[(&str, &str)] = &[
    ("B", "duration begin"),
    ("E", "duration end"),
    ("b", "async begin"),
    ("n", "async instant"),
    ("e", "async end"),
    ("S", "legacy async begin"),
    ("T", "legacy async step"),
    ("F", "legacy async end"),
    ("C", "counter"),
    ("P", "sample"),
    ("O", "object snapshot"),
    ("N", "object created"),
    ("D", "object destroyed"),
    ("V", "memory dump"),
    ("v", "memory dump"),
    ("R", "mark"),
    ("c", "clock sync"),
    ("(", "context begin"),
    (")", "context end"),
];

struct Invalid {
    count: u64,
    first: Option<String>,
}

/// The first pass's state: what is collected so far, the thread table, the threads' names and
/// the events that could not be read.
struct Collector {
    c: Collected,
    thread_of: HashMap<(Key, Key), u32>,
    names: HashMap<(Key, Key), String>,
    invalid: Invalid,
}

/// Runs the first pass over `events`.
pub(crate) fn collect(events: &[&RawValue], report: &mut ImportReport) -> Collected {
    let mut pass = Collector {
        c: Collected::default(),
        thread_of: HashMap::new(),
        names: HashMap::new(),
        invalid: Invalid {
            count: 0,
            first: None,
        },
    };
    for (i, raw) in events.iter().enumerate() {
        let ev: RawEvent = match serde_json::from_str(raw.get()) {
            Ok(ev) => ev,
            Err(e) => {
                pass.bad(i, format!("not an event object ({e})"));
                continue;
            }
        };
        let ph = ev.ph.as_deref().unwrap_or("");
        let file = i.min(u32::MAX as usize) as u32;
        match ph {
            "X" => pass.complete(i, file, ev, report),
            "i" | "I" => pass.instant(i, file, ev, report),
            "M" => pass.metadata(ev),
            "s" | "t" | "f" => pass.flow(&ev),
            "" => pass.bad(i, "no `ph` (phase)".to_string()),
            other => match OTHER_KNOWN_PHASES.iter().find(|(p, _)| *p == other) {
                Some((p, what)) => report.skip(format!("phase `{p}` ({what}) events")),
                None => report.skip(format!(
                    "unknown phase `{}` events",
                    trace_format::escape(other)
                )),
            },
        }
    }
    pass.finish(report)
}

impl Collector {
    /// Counts event `i` as unreadable because of `what`.
    fn bad(&mut self, i: usize, what: String) {
        self.invalid.count += 1;
        if self.invalid.first.is_none() {
            self.invalid.first = Some(format!("traceEvents[{i}]: {}", trace_format::escape(&what)));
        }
    }

    /// An `X` (complete) event: the profiler window, a GPU activity or a host span.
    fn complete(&mut self, i: usize, file: u32, ev: RawEvent<'_>, report: &mut ImportReport) {
        // held bounded from here on (a 100 MB name is not copied per memory event)
        let name =
            trace_schema::intern::bounded(ev.name.as_deref().unwrap_or("(unnamed)")).into_owned();
        let start = match time_field(ev.ts, "ts") {
            Ok(t) => t,
            Err(why) => {
                self.bad(i, format!("`X` event `{}`: {why}", short(&name)));
                return;
            }
        };
        let dur = match time_field(ev.dur, "dur") {
            Ok(d) if d >= 0 => d,
            Ok(d) => {
                self.bad(
                    i,
                    format!("`X` event `{}`: `dur` {d} ns is negative", short(&name)),
                );
                return;
            }
            Err(why) => {
                self.bad(i, format!("`X` event `{}`: {why}", short(&name)));
                return;
            }
        };
        let end = start + dur;
        let cat = ev.cat.as_deref().unwrap_or("").to_ascii_lowercase();
        if cat == "trace" {
            self.c.window = Some(match self.c.window {
                Some((s, e)) => (s.min(start), e.max(end)),
                None => (start, end),
            });
            return;
        }
        if GPU_CATEGORIES.contains(&cat.as_str()) {
            self.gpu(ev, (start, end), cat);
            return;
        }
        self.host(ev, name, file, (start, end), cat, report);
    }

    /// A GPU activity of category `cat` over `(start, end)`.
    fn gpu(&mut self, ev: RawEvent<'_>, (start, end): (i128, i128), cat: String) {
        let args = ev.args.unwrap_or_default();
        let pid = ev.pid.as_ref().map(|p| p.to_string());
        let index = args.device.get().map(|d| d.to_string()).or(pid);
        let device = match index {
            Some(i) => format!("cuda:{i}"),
            None => "cuda".to_string(),
        };
        let stream = match (args.stream.get(), &ev.tid) {
            (Some(s), _) => s.to_string(),
            (None, Some(t)) => t.to_string(),
            (None, None) => "?".to_string(),
        };
        self.c.gpus.push(Gpu {
            start,
            end,
            device,
            stream,
            category: cat,
            correlation: args.correlation.get(),
            external_id: args.external_id.get(),
        });
    }

    /// A host span of category `cat` over `(start, end)`.
    fn host(
        &mut self,
        ev: RawEvent<'_>,
        name: String,
        file: u32,
        (start, end): (i128, i128),
        cat: String,
        report: &mut ImportReport,
    ) {
        let args = ev.args.unwrap_or_default();
        let host_cat = match cat.as_str() {
            "cpu_op" | "operator" => HostCat::CpuOp,
            "user_annotation" => HostCat::UserAnnotation,
            "python_function" => HostCat::PythonFunction,
            c if RUNTIME_CATEGORIES.contains(&c) => HostCat::Runtime,
            _ => HostCat::Other,
        };
        *report.spans.categories.entry(cat).or_default() += 1;
        let kind = match host_cat {
            HostCat::CpuOp | HostCat::Runtime => SpanKind::Op,
            HostCat::PythonFunction if name.starts_with("nn.Module: ") => SpanKind::Module,
            _ => SpanKind::Function,
        };
        let thread = thread_index(&mut self.c, &mut self.thread_of, &ev.pid, &ev.tid);
        self.c.nodes.push(Node {
            name,
            kind,
            class: NodeClass::Host(host_cat),
            thread: Some(thread),
            start,
            end,
            file,
            external_id: args.external_id.get(),
            correlation: args.correlation.get(),
            parent: None,
            step: None,
            module_path: None,
        });
    }

    /// An `i`/`I` (instant) event: a `[memory]` record, or counted as skipped.
    fn instant(&mut self, i: usize, file: u32, ev: RawEvent<'_>, report: &mut ImportReport) {
        if ev.name.as_deref() != Some("[memory]") {
            report.skip("instant events other than `[memory]`");
            return;
        }
        let ts = match time_field(ev.ts, "ts") {
            Ok(t) => t,
            Err(why) => {
                self.bad(i, format!("`[memory]` event: {why}"));
                return;
            }
        };
        let args = ev.args.unwrap_or_default();
        let (Some(bytes), Some(addr)) = (args.bytes.get(), args.addr.get()) else {
            self.bad(
                i,
                "`[memory]` event lacks an integer `Bytes` or `Addr`".to_string(),
            );
            return;
        };
        let Ok(addr) = u64::try_from(addr) else {
            self.bad(i, format!("`[memory]` event has a negative `Addr` {addr}"));
            return;
        };
        let Some(device_type) = args.device_type.get() else {
            self.bad(
                i,
                "`[memory]` event lacks an integer `Device Type`".to_string(),
            );
            return;
        };
        if bytes == 0 {
            report.skip("`[memory]` events of 0 bytes");
            return;
        }
        let (device, is_cpu) = device_label(device_type, args.device_id.get());
        let thread = thread_index(&mut self.c, &mut self.thread_of, &ev.pid, &ev.tid);
        let non_negative = |v: Option<i128>| v.filter(|&b| b >= 0);
        self.c.mems.push(Mem {
            ts,
            process: ev.pid.as_ref().map(|p| p.to_string()),
            file,
            thread: Some(thread),
            device,
            is_cpu,
            addr,
            bytes,
            total_allocated: non_negative(args.total_allocated.get()),
            total_reserved: non_negative(args.total_reserved.get()),
        });
    }

    /// An `M` (metadata) event: a thread's name.
    fn metadata(&mut self, ev: RawEvent<'_>) {
        let args = ev.args.unwrap_or_default();
        if ev.name.as_deref() == Some("thread_name") {
            if let (Some(pid), Some(tid), Some(n)) = (ev.pid, ev.tid, args.name) {
                self.names
                    .insert((pid, tid), trace_schema::intern::bounded(&n).into_owned());
            }
        }
    }

    /// An `s`/`t`/`f` (flow) event: counted per (category, id).
    fn flow(&mut self, ev: &RawEvent<'_>) {
        let key = (
            ev.cat.as_deref().unwrap_or("").to_string(),
            ev.id.clone().unwrap_or(Key::Text(String::new())),
        );
        let entry = self.c.flows.entry(key).or_default();
        match ev.ph.as_deref() {
            Some("s") => entry.0 += 1,
            Some("f") => entry.1 += 1,
            _ => {}
        }
    }

    /// Names the threads and warns of the unreadable events.
    fn finish(mut self, report: &mut ImportReport) -> Collected {
        for t in &mut self.c.threads {
            t.name = self.names.get(&(t.pid.clone(), t.tid.clone())).cloned();
        }
        if self.invalid.count > 0 {
            report.warn(format!(
                "{} events could not be read and were skipped (first: {})",
                self.invalid.count,
                self.invalid.first.unwrap_or_default()
            ));
        }
        self.c
    }
}

/// A time field in exact nanoseconds, or why not (naming the field and, elided, its text).
fn time_field(raw: Option<&RawValue>, field: &str) -> Result<i128, String> {
    let raw = raw.ok_or_else(|| format!("no `{field}`"))?;
    micros_to_ns(raw.get()).map_err(|e| {
        let why = match e {
            NumberError::OutOfRange => {
                "is out of range: no integer of nanoseconds up to 10^30 holds it"
            }
            NumberError::NotANumber | NumberError::NotIntegral => "is not a JSON number",
        };
        format!(
            "`{field}` {} {why}",
            trace_format::escape(&trace_format::elide_middle(raw.get(), 40))
        )
    })
}

/// A name elided for a message.
fn short(name: &str) -> std::borrow::Cow<'_, str> {
    trace_format::elide_middle(name, 80)
}

fn thread_index(
    c: &mut Collected,
    thread_of: &mut HashMap<(Key, Key), u32>,
    pid: &Option<Key>,
    tid: &Option<Key>,
) -> u32 {
    let unknown = || Key::Text("?".to_string());
    let key = (
        pid.clone().unwrap_or_else(unknown),
        tid.clone().unwrap_or_else(unknown),
    );
    *thread_of.entry(key.clone()).or_insert_with(|| {
        c.threads.push(Thread {
            pid: key.0,
            tid: key.1,
            name: None,
        });
        (c.threads.len() - 1) as u32
    })
}

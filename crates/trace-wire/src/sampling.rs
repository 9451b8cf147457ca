//! The wire types of sampled call stacks (trace/12): a symbol table of [`FrameEvent`]s, the
//! distinct call stacks as [`StackEvent`]s (frame ids, innermost first), one [`SampleEvent`]
//! per wall-clock sample of a thread, and one [`SamplerEvent`] with the sampler's own account
//! (rate, ticks, lost samples, unwinder, symbol quality).
//!
//! # Order on the wire
//! Symbols are resolved after the captured step, so a producer writes, after the step's other
//! events: every `frame`, then every `stack` (referring only to frames already written), then
//! every `sample` (referring only to stacks already written), then the one `sampler`. A reader
//! reports a reference to an id not yet defined as a semantic issue and drops that sample.
//!
//! # Why one line per sample
//! A sample line is about 60 bytes (`{"kind":"sample","timestamp_ns":…,"thread":1,"stack_id":…,
//! "span_id":"s12"}`): 10^5 samples (100 s at 1 kHz) are about 6 MB, less than the storage
//! events of most steps, and they keep the time order a timeline (Perfetto, the report's chart)
//! needs. Aggregated per-span stacks would lose it.
//!
//! # Example
//! ```text
//! {"kind":"frame","id":0,"function":"candle_core::tensor::Tensor::matmul","file":"/src/candle-core-0.11.1/src/tensor.rs","line":1234}
//! {"kind":"frame","id":1,"function":"llama::train_step","file":"examples/src/llama.rs","line":80}
//! {"kind":"stack","id":0,"frames":[0,1]}
//! {"kind":"sample","timestamp_ns":1500,"thread":1,"stack_id":0,"span_id":"s3"}
//! {"kind":"sampler","hz":1000,"period_ns":1000000,"clock":"wall","unwinder":"libgcc","symbols":"line_tables","threads":[{"thread":1,"name":"main","start_ns":1000,"end_ns":12000,"ticks":11,"samples":11,"lost_overrun":0,"lost_buffer":0}]}
//! ```

use serde::{Deserialize, Serialize};

/// One code location of the symbol table (trace/12). After inlining is expanded, one return
/// address can give several frames (the inlined callees first); each is its own `frame`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FrameEvent {
    /// Id, unique among frames; [`StackEvent::frames`] refer to it.
    pub id: u32,
    /// Demangled function name without its hash (`candle_core::tensor::Tensor::matmul`);
    /// absent when the address has no symbol (a stripped binary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Source file, as the line tables name it; absent without line tables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// 1-based source line; absent without line tables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The object file (executable or shared library) the address is in, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The address, `0x…`, when nothing else names the frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// One distinct sampled call stack (trace/12).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StackEvent {
    /// Id, unique among stacks; [`SampleEvent::stack_id`] refers to it.
    pub id: u32,
    /// Frame ids, innermost (the interrupted function) first, outermost last.
    pub frames: Vec<u32>,
}

/// One wall-clock sample of a thread's call stack (trace/12).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SampleEvent {
    /// When the sample was taken, ns since session start.
    pub timestamp_ns: u64,
    /// The sampled thread: the key of [`SampledThread::thread`].
    pub thread: u64,
    /// The call stack.
    pub stack_id: u32,
    /// The innermost span open on that thread at that moment (its ancestors give the span
    /// stack: modules, pass); absent when none was open on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
}

wire_enum! {
    /// How well addresses were turned into names.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum SymbolQuality {
        /// Function names, files and lines (a build with `debug = "line-tables-only"` or more).
        LineTables = "line_tables",
        /// Function names only (no line tables: backward arms cannot be told apart).
        NamesOnly = "names_only",
        /// No symbols (stripped): addresses only.
        None = "none",
    }
}

/// One thread the sampler sampled.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SampledThread {
    /// The thread's key (the `thread` of its samples).
    pub thread: u64,
    /// Its name, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When its timer was armed, ns since session start.
    pub start_ns: u64,
    /// When its timer was disarmed, ns since session start.
    pub end_ns: u64,
    /// Timer expirations in that window (samples plus lost ones).
    pub ticks: u64,
    /// Samples written.
    pub samples: u64,
    /// Expirations the kernel merged into one signal (`si_overrun`): no stack was taken.
    pub lost_overrun: u64,
    /// Samples lost to a full buffer.
    pub lost_buffer: u64,
}

/// The sampler's account of the capture (trace/12): exactly one in a trace whose contract
/// declares `operations: sampled`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SamplerEvent {
    /// Requested rate, samples per second per thread.
    pub hz: u64,
    /// Timer period, ns.
    pub period_ns: u64,
    /// The clock the timer runs on: `wall` (CLOCK_MONOTONIC: waiting time is sampled too).
    pub clock: String,
    /// How stacks were walked: `libgcc` (the DWARF unwinder through `backtrace`),
    /// `frame_pointers` (the bounds-checked frame-pointer chain) or `frame_pointers+libgcc`
    /// (frame pointers where the chain passed the handler's check, libgcc for the rest).
    pub unwinder: String,
    /// How well they were symbolised.
    pub symbols: SymbolQuality,
    /// Frames that could not be named (no symbol for the address).
    #[serde(default)]
    pub unresolved_frames: u64,
    /// Stacks cut at the unwinder's depth limit (their outermost frames are missing).
    #[serde(default)]
    pub truncated_stacks: u64,
    /// Every sampled thread.
    pub threads: Vec<SampledThread>,
}

impl SamplerEvent {
    /// The account's own rules: a rate and a period above 0, each thread listed once, its
    /// window not reversed, and samples plus lost samples not more than its ticks (checked
    /// sums). Returns every problem found (empty when it holds).
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.hz == 0 {
            problems.push("sampler `hz` is 0".to_string());
        }
        if self.period_ns == 0 {
            problems.push("sampler `period_ns` is 0".to_string());
        }
        let mut seen = std::collections::HashSet::new();
        for t in &self.threads {
            if !seen.insert(t.thread) {
                problems.push(format!("sampler lists thread {} twice", t.thread));
            }
            if t.start_ns > t.end_ns {
                problems.push(format!(
                    "sampler thread {}: window starts at {} ns, after its end at {} ns",
                    t.thread, t.start_ns, t.end_ns
                ));
            }
            let accounted = t
                .samples
                .checked_add(t.lost_overrun)
                .and_then(|x| x.checked_add(t.lost_buffer));
            if accounted.is_none_or(|a| a > t.ticks) {
                problems.push(format!(
                    "sampler thread {}: {} samples and {} + {} lost exceed its {} ticks",
                    t.thread, t.samples, t.lost_overrun, t.lost_buffer, t.ticks
                ));
            }
        }
        problems
    }

    /// Samples written, all threads. Saturating.
    pub fn samples(&self) -> u64 {
        self.threads
            .iter()
            .fold(0u64, |a, t| a.saturating_add(t.samples))
    }

    /// Samples lost (overrun and full buffer), all threads. Saturating.
    pub fn lost(&self) -> u64 {
        self.threads.iter().fold(0u64, |a, t| {
            a.saturating_add(t.lost_overrun)
                .saturating_add(t.lost_buffer)
        })
    }
}

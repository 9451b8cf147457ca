//! # trace-ops
//!
//! Where the time goes: the Candle operations of a captured step, from the wall-clock stack
//! samples of a candle-graph trace (trace/12). Candle has no per-op hook (closed `Device` and
//! `Storage` enums, a crate-private `Tensor::op()`), so the probe samples the training thread's
//! stack and this crate reads each stack as an operation:
//!
//! - [`availability`]: when the samples give an estimate (bad samples dropped and counted, the
//!   estimate flagged biased past [`BIASED_SHARE`], none without a sample in the region);
//! - [`rules`]: the stack-to-op mapping as data, with its sources in Candle 0.11.1 (op modules,
//!   helpers, the generated line table of `Tensor::backward`'s arms);
//! - [`classify`]: one stack → an op (`matmul`, the outermost op frame: what the model called),
//!   a backward op (`matmul.backward`, `grad_accumulate`), a non-op function or the probe;
//! - [`profile`]: [`OpProfile::from_document`] — rows of op × pass × module with samples, the
//!   share of the measured region with its 95% Wilson interval ([`interval`]) and the estimated
//!   self time, grouping, filters, sorting, file I/O found inside ops;
//! - [`flame`]: bounded flame trees per thread and pass for views;
//! - [`sites`]: [`SiteProfile::from_document`] — the allocation sites (trace/13) read as ops:
//!   each storage's op, module and pass, exact allocating-call counts and the alloc-clocked
//!   time per op (a second, measured time source beside the samples).
//!
//! Every figure is an estimate from samples and says so: rows carry their sample count and
//! interval, and a profile of fewer than [`FEW_SAMPLES`] samples is flagged. A trace without
//! samples gives [`Unavailable`] with the producer's reason, never zeros.
//!
//! ```
//! let text = concat!(
//!   r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#, "\n",
//!   r#"{"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}"#, "\n",
//!   r#"{"kind":"span_end","id":"s1","duration_ns":4000000}"#, "\n",
//!   r#"{"kind":"frame","id":0,"function":"candle_core::tensor::Tensor::matmul"}"#, "\n",
//!   r#"{"kind":"frame","id":1,"function":"candle_nn::ops::softmax_last_dim"}"#, "\n",
//!   r#"{"kind":"frame","id":2,"function":"my_model::step"}"#, "\n",
//!   r#"{"kind":"stack","id":0,"frames":[0,2]}"#, "\n",
//!   r#"{"kind":"stack","id":1,"frames":[1,2]}"#, "\n",
//!   r#"{"kind":"sample","timestamp_ns":1000000,"thread":1,"stack_id":0,"span_id":"s1"}"#, "\n",
//!   r#"{"kind":"sample","timestamp_ns":2000000,"thread":1,"stack_id":0,"span_id":"s1"}"#, "\n",
//!   r#"{"kind":"sample","timestamp_ns":3000000,"thread":1,"stack_id":1,"span_id":"s1"}"#, "\n",
//!   r#"{"kind":"terminal","outcome":"complete","timestamp_ns":4000000}"#, "\n",
//! );
//! let doc = trace_schema::load_str(text).unwrap();
//! let profile = trace_ops::OpProfile::from_document(&doc).unwrap();
//! let top = &profile.rows[0];
//! assert_eq!((top.op.as_deref(), top.samples), (Some("matmul"), 2));
//! assert_eq!(top.self_ns, Some(2_666_667)); // 2 of 3 samples of a 4 ms region
//! assert!(top.share_low < top.share && top.share < top.share_high);
//! assert!(profile.totals.few_samples);
//! ```

#![deny(missing_docs)]

pub mod availability;
pub mod classify;
pub mod flame;
pub mod interval;
pub mod measured;
mod modules;
pub mod names;
pub mod profile;
mod profile_build;
pub mod roles;
pub mod rules;
mod shared_steps;
pub mod sites;

pub use availability::{unavailable, Dropped, BIASED_SHARE};
pub use classify::{classify_stack, OpKind, StackClass};
pub use flame::{flame_trees, FlameNode, FlameOptions, FlameTree, OUTSIDE_STEP};
pub use interval::{wilson, Share, Z_95};
pub use measured::{MeasuredOps, MeasuredRow};
pub use profile::{
    cmp_rows, filter_pass, sort_rows, FileIoRow, GroupBy, ModuleSource, OpProfile, OpRow,
    SampleTotals, SortBy, ThreadTotals, Unavailable, FEW_SAMPLES,
};
pub use roles::{Framework, Role, RoleMap, RoleMapError, SideOp, SideOps, TimeSource, PROBE_OP};
pub use sites::{SiteOpRow, SitePass, SiteProfile, SiteTotals, StorageLabel, StorageOp};

//! # candle-graph-examples
//!
//! Real Candle training loops: the models the `candle-graph demo` trains and the runnable
//! examples users copy (`cargo run -p candle-graph-examples --example llama` / `--example mlp`).
//!
//! - [`llama`]: a small llama-style causal language model built only from differentiable
//!   candle-nn operations, loss over every position;
//! - [`mlp`]: the 784-512-512-10 MLP, batch 64;
//! - [`infer`]: candle-transformers' `llama2_c` generating with its KV cache, one generation
//!   captured (`prefill`, then a `decode` span per token; `candle-graph demo --inference`);
//! - [`cnn`]: a small CNN (conv2d → relu → max_pool2d ×2 → linear, AdamW, batch 64) trained
//!   as issue 20's user did, the input batch made before the captured step and never labelled
//!   (`--example cnn`);
//! - [`conformance`]: issue 43's suite of model families (MLP, CNN with batch norm, GRU,
//!   transformer encoder) captured with the probe and timed op by op with a clock
//!   (`--example conformance`; the PyTorch twins in `scripts/conformance/`);
//! - [`init`] and [`data`]: seeded weights and learnable synthetic data (Candle's CPU RNG cannot
//!   be seeded), so runs are reproducible;
//! - [`model`]: both models behind one [`Workload`];
//! - [`device`]: `cpu` / `cuda[:N]` / `metal[:N]` (features `cuda`, `metal`);
//! - [`overhead`]: armed-vs-disarmed update times, paired, on any device;
//! - [`train`](mod@train): the instrumented loop (the profiler guard, the step guard, a
//!   generic `fn train_loop<O: Optimizer>` run with trace-probe's optimizer wrapper) that writes
//!   `DIR/trace.jsonl`, shared by the examples, `cargo xtask fixtures` and `candle-graph demo`;
//! - [`cli`]: the examples' command line (clap).
//!
//! ```
//! use candle_core::Device;
//! use candle_graph_examples::{ModelKind, ModelSizes, Workload};
//! let work = Workload::new(ModelKind::Llama, ModelSizes::default(), 42, &Device::Cpu)?;
//! let loss = work.loss(&work.batch(1)?)?;
//! assert!(loss.to_scalar::<f32>()?.is_finite());
//! # Ok::<(), candle_core::Error>(())
//! ```

#![deny(missing_docs)]

pub mod cli;
pub mod cnn;
pub mod conformance;
pub mod data;
pub mod device;
pub mod infer;
pub mod init;
pub mod llama;
pub mod mlp;
pub mod model;
pub mod overhead;
pub mod train;

pub use device::DeviceSpec;
pub use model::{ModelKind, ModelSizes, Workload};
pub use overhead::{measure_overhead, OverheadReport};
pub use train::{
    train, train_with_progress, ParameterShape, Seeds, TrainConfig, TrainError, TrainReport,
    UpdateStyle,
};

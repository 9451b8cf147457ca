//! A small convolutional network trained as a new user writes it (issue 20's case): `conv2d →
//! relu → max_pool2d` twice, then a linear classifier; AdamW, batch 64, the profiler's capture
//! of step 2, and — unlike [`crate::train`] — **no labelled facts**: the input batch is made
//! before the step guard and the probe is told nothing about it.
//!
//! Sizes (the defaults, [`CnnConfig::default`]): images `(64, 1, 16, 16)` f32 and labels `(64)`
//! u32, so the input batch holds `64·1·16·16·4 + 64·4 = 65,536 + 256 = 65,792` bytes
//! ([`CnnConfig::input_batch_bytes`]); `conv1` 1→8 channels, 3×3, padding 1 → `(64, 8, 16, 16)`,
//! pool 2 → `(64, 8, 8, 8)`; `conv2` 8→16 → `(64, 16, 8, 8)`, pool 2 → `(64, 16, 4, 4)`;
//! flattened 256 → `fc` → 10 classes.
//!
//! [`UpdateStyle::DropLossBeforeStep`] is the issue's loop: `let grads =
//! profiler.backward(&loss)?; drop((loss, logits)); opt.step(&grads)?`.

use std::path::PathBuf;

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{AdamW, Conv2dConfig, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use trace_probe::nn::{self, Pool2d, Traced};
use trace_probe::{ProbedOptimizer, ProfileRun};

use crate::data::{self, Batch};
use crate::device::DeviceSpec;
use crate::init::seed_varmap;
use crate::train::{ParameterShape, TrainError, TrainReport, UpdateStyle, TRACE_FILE};

/// The entrypoint recorded in the trace.
pub const ENTRYPOINT: &str = "cnn::train_step";

/// Sizes of the CNN and of one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CnnConfig {
    /// Input channels.
    pub in_channels: usize,
    /// Image height and width (a multiple of 4: two 2×2 poolings).
    pub image_size: usize,
    /// Output channels of `conv1`.
    pub conv1_channels: usize,
    /// Output channels of `conv2`.
    pub conv2_channels: usize,
    /// Number of classes.
    pub num_classes: usize,
    /// Images per batch.
    pub batch_size: usize,
    /// A hidden linear layer (`fc_hidden`, then relu) between the flattened features and
    /// `fc`; `None`: `fc` alone.
    pub hidden: Option<usize>,
}

impl Default for CnnConfig {
    /// 1×16×16 images, 8 and 16 channels, 10 classes, batch 64.
    fn default() -> Self {
        Self {
            in_channels: 1,
            image_size: 16,
            conv1_channels: 8,
            conv2_channels: 16,
            num_classes: 10,
            batch_size: 64,
            hidden: None,
        }
    }
}

impl CnnConfig {
    /// Issue 43's CNN ported from PyTorch: 1×28×28 images, conv 1→16 and 16→32 (3×3, padding
    /// 1), two 2×2 max-pools, linear 1568→128, relu, linear 128→10, batch 32.
    pub fn mnist() -> Self {
        Self {
            in_channels: 1,
            image_size: 28,
            conv1_channels: 16,
            conv2_channels: 32,
            num_classes: 10,
            batch_size: 32,
            hidden: Some(128),
        }
    }

    /// Features entering `fc`: `conv2_channels × (image_size / 4)²`.
    pub fn flat_features(&self) -> usize {
        self.conv2_channels * (self.image_size / 4) * (self.image_size / 4)
    }

    /// Heap bytes of one input batch: the images (f32) plus the labels (u32), each one
    /// storage sized `elements × 4` (65,792 B with the defaults).
    pub fn input_batch_bytes(&self) -> u64 {
        let images = self.batch_size * self.in_channels * self.image_size * self.image_size;
        ((images + self.batch_size) * 4) as u64
    }
}

/// `conv1 → relu → pool1 → conv2 → relu → pool2 → flatten → fc`, with the probe's module
/// spans (`cnn/conv2d`, `cnn/max-pool2d`, `cnn/linear`).
#[derive(Debug, Clone)]
pub struct Cnn {
    conv1: Traced<candle_nn::Conv2d>,
    pool1: Traced<Pool2d>,
    conv2: Traced<candle_nn::Conv2d>,
    pool2: Traced<Pool2d>,
    fc_hidden: Option<Traced<candle_nn::Linear>>,
    fc: Traced<candle_nn::Linear>,
    span: tracing::Span,
}

impl Cnn {
    /// Builds the layers from `vb` (`conv1.weight` `(8, 1, 3, 3)`, `conv1.bias`, `conv2.*`,
    /// `fc.weight` `(10, 256)`, `fc.bias`).
    ///
    /// # Errors
    /// Candle errors from the var builder; an image size that is not a positive multiple of 4.
    pub fn new(cfg: &CnnConfig, vb: VarBuilder) -> Result<Self> {
        if cfg.image_size == 0 || cfg.image_size % 4 != 0 {
            candle_core::bail!(
                "cnn config: image_size {} is not a positive multiple of 4",
                cfg.image_size
            );
        }
        let conv = Conv2dConfig {
            padding: 1,
            ..Default::default()
        };
        Ok(Self {
            conv1: nn::conv2d(cfg.in_channels, cfg.conv1_channels, 3, conv, vb.pp("conv1"))?,
            pool1: nn::max_pool2d(2),
            conv2: nn::conv2d(
                cfg.conv1_channels,
                cfg.conv2_channels,
                3,
                conv,
                vb.pp("conv2"),
            )?,
            pool2: nn::max_pool2d(2),
            fc_hidden: match cfg.hidden {
                Some(h) => Some(nn::linear(cfg.flat_features(), h, vb.pp("fc_hidden"))?),
                None => None,
            },
            fc: nn::linear(
                cfg.hidden.unwrap_or(cfg.flat_features()),
                cfg.num_classes,
                vb.pp("fc"),
            )?,
            span: tracing::trace_span!("cnn"),
        })
    }
}

impl Module for Cnn {
    /// `xs` `(batch, in_channels, size, size)` f32 → logits `(batch, num_classes)`.
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        let xs = self.pool1.forward(&self.conv1.forward(xs)?.relu()?)?;
        let xs = self.pool2.forward(&self.conv2.forward(&xs)?.relu()?)?;
        let xs = xs.flatten_from(1)?;
        match &self.fc_hidden {
            Some(h) => self.fc.forward(&h.forward(&xs)?.relu()?),
            None => self.fc.forward(&xs),
        }
    }
}

/// The batch of one-based step `step`: [`data::prototype_batch`] over `size²` features (class
/// prototypes plus noise, learnable), the images shaped `(batch, in_channels, size, size)`
/// (a view of the same storage: no copy).
///
/// # Errors
/// Candle errors building the tensors.
pub fn batch(cfg: &CnnConfig, seed: u64, step: u64, device: &Device) -> Result<Batch> {
    let features = cfg.in_channels * cfg.image_size * cfg.image_size;
    let b = data::prototype_batch(
        features,
        cfg.num_classes,
        cfg.batch_size,
        seed,
        step,
        device,
    )?;
    Ok(Batch {
        inputs: b.inputs.reshape((
            cfg.batch_size,
            cfg.in_channels,
            cfg.image_size,
            cfg.image_size,
        ))?,
        targets: b.targets,
    })
}

/// A CNN training run.
#[derive(Debug, Clone)]
pub struct CnnRun {
    /// Sizes.
    pub sizes: CnnConfig,
    /// Optimizer updates to run (≥ `capture_step`).
    pub steps: u64,
    /// The one-based update captured.
    pub capture_step: u64,
    /// Seed of weights and data.
    pub seed: u64,
    /// AdamW learning rate.
    pub learning_rate: f64,
    /// Directory the trace is written into (as [`TRACE_FILE`]); created if missing.
    pub out_dir: PathBuf,
    /// The probe's deterministic mode.
    pub deterministic: bool,
    /// The device to train on (default CPU).
    pub device: DeviceSpec,
    /// How each step updates the parameters ([`UpdateStyle::DropLossBeforeStep`]: `drop((loss,
    /// logits))` between backward and the optimizer step).
    pub update: UpdateStyle,
    /// Wall-clock stack samples per second of the captured step (0: off).
    pub sample_hz: u32,
}

impl CnnRun {
    /// Defaults: 3 steps capturing step 2, seed 42, learning rate 1e-3, writing into `out_dir`.
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        Self {
            sizes: CnnConfig::default(),
            steps: 3,
            capture_step: 2,
            seed: 42,
            learning_rate: 1e-3,
            out_dir: out_dir.into(),
            deterministic: false,
            device: DeviceSpec::Cpu,
            update: UpdateStyle::default(),
            sample_hz: trace_probe::DEFAULT_SAMPLE_HZ,
        }
    }
}

fn candle(context: impl FnOnce() -> String) -> impl FnOnce(candle_core::Error) -> TrainError {
    move |source| TrainError::Candle {
        context: context(),
        source,
    }
}

/// Trains the CNN on `run.device` as issue 20's user did and captures `run.capture_step`: the profiler
/// starts before the model is built, each step's batch is made **before** its step guard and
/// never labelled, the update is `backward_step` or (with
/// [`UpdateStyle::DropLossBeforeStep`]) backward, `drop((loss, logits))`, `opt.step`.
///
/// # Errors
/// [`TrainError::InvalidConfig`] (capture step 0 or beyond `steps`), Candle errors naming the
/// step and phase, probe errors.
pub fn train_cnn(run: &CnnRun) -> std::result::Result<TrainReport, TrainError> {
    if run.capture_step == 0 || run.capture_step > run.steps {
        return Err(TrainError::InvalidConfig(format!(
            "capture step {} must be within 1..={} steps",
            run.capture_step, run.steps
        )));
    }
    let device = run.device.open().map_err(TrainError::Device)?;
    let trace_path = run.out_dir.join(TRACE_FILE);
    let varmap = VarMap::new();
    let profiler = ProfileRun::training(ENTRYPOINT, run.capture_step)
        .device(&device)
        .varmap(&varmap)
        .tag("model", "cnn")
        .tag("seed", run.seed.to_string())
        .tag("steps", run.steps.to_string())
        .deterministic(run.deterministic)
        .sample_hz(run.sample_hz)
        .start(&trace_path)?;
    let result = (|| -> std::result::Result<Vec<f32>, TrainError> {
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let model = Cnn::new(&run.sizes, vb).map_err(candle(|| "building the model".into()))?;
        seed_varmap(&varmap, run.seed).map_err(candle(|| "seeding the weights".into()))?;
        let mut opt = ProbedOptimizer::<AdamW>::new(
            varmap.all_vars(),
            ParamsAdamW {
                lr: run.learning_rate,
                ..ParamsAdamW::default()
            },
        )
        .map_err(candle(|| "building the optimizer".into()))?;
        let mut losses = Vec::with_capacity(run.steps as usize);
        for step in 1..=run.steps {
            // Made before the step guard, as a data loader would: live when the step begins.
            let batch = batch(&run.sizes, run.seed, step, &device)
                .map_err(candle(|| format!("step {step}: building the batch")))?;
            let _step = profiler.step(step);
            let logits = model
                .forward(&batch.inputs)
                .map_err(candle(|| format!("step {step}: forward")))?;
            let loss = candle_nn::loss::cross_entropy(&logits, &batch.targets)
                .map_err(candle(|| format!("step {step}: loss")))?;
            losses.push(
                loss.to_scalar::<f32>()
                    .map_err(candle(|| format!("step {step}: reading the loss")))?,
            );
            match run.update {
                UpdateStyle::BackwardStep => opt
                    .backward_step(&loss)
                    .map_err(candle(|| format!("step {step}: backward and optimizer")))?,
                UpdateStyle::DropLossBeforeStep => {
                    let grads = profiler
                        .backward(&loss)
                        .map_err(candle(|| format!("step {step}: backward")))?;
                    drop((loss, logits)); // the graph goes before the step
                    opt.step(&grads)
                        .map_err(candle(|| format!("step {step}: optimizer")))?;
                }
                UpdateStyle::DetachedParameterGradients => {
                    let grads = profiler
                        .backward(&loss)
                        .map_err(candle(|| format!("step {step}: backward")))?;
                    drop((loss, logits));
                    let kept = crate::train::parameter_gradients(grads, &varmap.all_vars());
                    opt.step(&kept)
                        .map_err(candle(|| format!("step {step}: optimizer")))?;
                }
            }
        }
        Ok(losses)
    })();
    // finish even when a step failed, so the trace ends with a terminal event
    let finished = profiler.finish();
    let losses = result?;
    let summary = finished?;
    let mut parameters: Vec<ParameterShape> = varmap
        .data()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(name, var)| ParameterShape {
            name: name.clone(),
            dims: var.dims().to_vec(),
            dtype: var.dtype(),
        })
        .collect();
    parameters.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(TrainReport {
        trace_path,
        device: trace_probe::DeviceLabel::of(&device).to_string(),
        losses,
        parameter_count: parameters
            .iter()
            .map(|p| p.dims.iter().product::<usize>())
            .sum(),
        parameter_tensors: parameters.len(),
        parameters,
        events_written: summary.events_written,
        backward_markers: summary.backward_markers,
        backward_marker_copy_bytes: summary.backward_marker_copy_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_batch_bytes() -> Result<()> {
        let cfg = CnnConfig::default();
        assert_eq!(cfg.input_batch_bytes(), 65_792);
        assert_eq!(cfg.flat_features(), 256);
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let model = Cnn::new(&cfg, vb)?;
        seed_varmap(&varmap, 1)?;
        let b = batch(&cfg, 1, 1, &Device::Cpu)?;
        assert_eq!(b.inputs.dims(), &[64, 1, 16, 16]);
        assert_eq!(b.targets.dims(), &[64]);
        assert_eq!(model.forward(&b.inputs)?.dims(), &[64, 10]);
        assert_eq!(varmap.all_vars().len(), 6);
        Ok(())
    }

    #[test]
    fn the_issue_43_cnn_has_its_shapes() -> Result<()> {
        let cfg = CnnConfig::mnist();
        assert_eq!(cfg.flat_features(), 1568);
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let model = Cnn::new(&cfg, vb)?;
        seed_varmap(&varmap, 1)?;
        let b = batch(&cfg, 1, 1, &Device::Cpu)?;
        assert_eq!(b.inputs.dims(), &[32, 1, 28, 28]);
        assert_eq!(model.forward(&b.inputs)?.dims(), &[32, 10]);
        assert_eq!(varmap.all_vars().len(), 8);
        Ok(())
    }

    #[test]
    fn loss_decreases() -> Result<()> {
        let cfg = CnnConfig::default();
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let model = Cnn::new(&cfg, vb)?;
        seed_varmap(&varmap, 7)?;
        let mut opt = AdamW::new(
            varmap.all_vars(),
            ParamsAdamW {
                lr: 1e-2,
                ..Default::default()
            },
        )?;
        let mut losses = Vec::new();
        for step in 1..=8 {
            let b = batch(&cfg, 7, step, &Device::Cpu)?;
            let loss = candle_nn::loss::cross_entropy(&model.forward(&b.inputs)?, &b.targets)?;
            losses.push(loss.to_scalar::<f32>()?);
            opt.backward_step(&loss)?;
        }
        assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
        assert!(losses[7] < losses[0] * 0.9, "{losses:?}");
        Ok(())
    }
}

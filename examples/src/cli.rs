//! The runnable examples' command line (`--out DIR`, `--steps N`, `--seed S`, `--batch N`,
//! `--device D`, `--deterministic`, `--drop-loss-before-step`, `--detach-parameter-gradients`,
//! `--backward-spans`, `--sample-hz N`; MLP: `--hidden-layers N`, `--detach-bias N`), parsed with clap.

use std::path::PathBuf;

use clap::Parser;

use crate::device::DeviceSpec;
use crate::model::ModelKind;
use crate::train::{TrainConfig, UpdateStyle};

/// Arguments of the runnable examples.
#[derive(Debug, Clone, Parser)]
#[command(
    about = "Trains a built-in model (CPU by default) and writes a candle-graph trace of step 2"
)]
pub struct ExampleArgs {
    /// Directory the trace is written into (as `trace.jsonl`); default `out/<model>`.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Training steps to run (step 2 is captured).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub steps: u64,
    /// Seed of weights and data.
    #[arg(long, value_name = "S", default_value_t = 42)]
    pub seed: u64,
    /// Examples (MLP) or sequences (llama) per batch; default the model's.
    #[arg(long, value_name = "N")]
    pub batch: Option<usize>,
    /// Device: `cpu`, `cuda[:N]` (built with `--features cuda`), `metal[:N]` (`--features
    /// metal`, macOS).
    #[arg(long, value_name = "D", default_value = "cpu", value_parser = parse_device)]
    pub device: DeviceSpec,
    /// The probe's deterministic mode (logical clock, sequential ids; golden fixtures).
    #[arg(long)]
    pub deterministic: bool,
    /// Run backward, drop the loss, then step (instead of `backward_step`): the activations
    /// are freed before the optimizer runs.
    #[arg(long)]
    pub drop_loss_before_step: bool,
    /// Run backward, drop the loss, keep only the parameters' gradients (detached) in a new
    /// store and drop the original one, then step: what the gradient store alone held is freed
    /// before the optimizer runs.
    #[arg(long, conflicts_with = "drop_loss_before_step")]
    pub detach_parameter_gradients: bool,
    /// MLP only: hidden layers (default 2, 784-512-512-10; 3 adds `fc4`).
    #[arg(long, value_name = "N")]
    pub hidden_layers: Option<usize>,
    /// MLP only: use the bias of layer `fc<N>` detached, so it gets no gradient (a bug to find).
    #[arg(long, value_name = "N")]
    pub detach_bias: Option<usize>,
    /// Per-module backward spans (the probe's boundary markers; off by default: they cost
    /// more than the probe's 3% target, see the trace-probe README).
    #[arg(long)]
    pub backward_spans: bool,
    /// Wall-clock stack samples per second of the captured step (0: off).
    #[arg(long, value_name = "N", default_value_t = trace_probe::DEFAULT_SAMPLE_HZ)]
    pub sample_hz: u32,
    /// CNN only: issue 43's sizes (1×28×28, conv 1→16→32, linear 1568→128→10, batch 32).
    #[arg(long)]
    pub mnist: bool,
}

fn parse_device(s: &str) -> Result<DeviceSpec, String> {
    s.parse()
}

impl ExampleArgs {
    /// The CNN run (`--example cnn`: `--out` default `out/cnn`, `--steps`, `--seed`,
    /// `--batch`, `--device`, `--deterministic`, `--drop-loss-before-step`, which drops
    /// `(loss, logits)` between backward and the optimizer step; the MLP flags are ignored).
    pub fn cnn_run(&self) -> crate::cnn::CnnRun {
        let mut run =
            crate::cnn::CnnRun::new(self.out.clone().unwrap_or_else(|| PathBuf::from("out/cnn")));
        run.steps = self.steps;
        run.seed = self.seed;
        run.deterministic = self.deterministic;
        run.device = self.device;
        run.update = self.update();
        run.sample_hz = self.sample_hz;
        if self.mnist {
            run.sizes = crate::cnn::CnnConfig::mnist();
        }
        if let Some(batch) = self.batch {
            run.sizes.batch_size = batch;
        }
        run
    }

    /// The update style the flags ask for (`backward_step` by default).
    pub fn update(&self) -> UpdateStyle {
        if self.drop_loss_before_step {
            UpdateStyle::DropLossBeforeStep
        } else if self.detach_parameter_gradients {
            UpdateStyle::DetachedParameterGradients
        } else {
            UpdateStyle::BackwardStep
        }
    }

    /// The training config for `model`.
    pub fn config(&self, model: ModelKind) -> TrainConfig {
        let out = self
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("out").join(model.as_str()));
        let mut config = TrainConfig::new(model, out);
        config.steps = self.steps;
        config.seed = self.seed;
        config.deterministic = self.deterministic;
        config.device = self.device;
        config.update = self.update();
        if let Some(n) = self.hidden_layers {
            config.sizes.mlp.hidden_layers = n;
        }
        config.sizes.mlp.detached_bias = self.detach_bias;
        config.backward_spans = self.backward_spans;
        config.sample_hz = self.sample_hz;
        if let Some(batch) = self.batch {
            match model {
                ModelKind::Llama => config.sizes.llama.batch_size = batch,
                ModelKind::Mlp => config.sizes.mlp.batch_size = batch,
            }
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags() {
        let args = ExampleArgs::try_parse_from([
            "mlp",
            "--out",
            "x",
            "--steps",
            "4",
            "--batch",
            "8",
            "--device",
            "cuda:1",
            "--deterministic",
        ])
        .unwrap();
        let c = args.config(ModelKind::Mlp);
        assert_eq!(c.out_dir, PathBuf::from("x"));
        assert_eq!(c.steps, 4);
        assert_eq!(c.sizes.mlp.batch_size, 8);
        assert!(c.deterministic);
        assert_eq!(c.device, DeviceSpec::Cuda(1));
        assert!(ExampleArgs::try_parse_from(["mlp", "--device", "tpu"]).is_err());
        assert_eq!(c.update, UpdateStyle::BackwardStep);
        let variant = ExampleArgs::try_parse_from([
            "mlp",
            "--drop-loss-before-step",
            "--hidden-layers",
            "3",
            "--detach-bias",
            "2",
        ])
        .unwrap()
        .config(ModelKind::Mlp);
        assert_eq!(variant.update, UpdateStyle::DropLossBeforeStep);
        let fixed = ExampleArgs::try_parse_from(["cnn", "--detach-parameter-gradients"]).unwrap();
        assert_eq!(
            fixed.config(ModelKind::Mlp).update,
            UpdateStyle::DetachedParameterGradients
        );
        assert_eq!(
            fixed.cnn_run().update,
            UpdateStyle::DetachedParameterGradients
        );
        assert!(ExampleArgs::try_parse_from([
            "cnn",
            "--drop-loss-before-step",
            "--detach-parameter-gradients"
        ])
        .is_err());
        assert_eq!(
            (
                variant.sizes.mlp.hidden_layers,
                variant.sizes.mlp.detached_bias
            ),
            (3, Some(2))
        );
        let defaults = ExampleArgs::try_parse_from(["llama"]).unwrap();
        assert_eq!(
            defaults.config(ModelKind::Llama).out_dir,
            PathBuf::from("out/llama")
        );
        assert!(ExampleArgs::try_parse_from(["mlp", "--bogus"]).is_err());
        assert!(ExampleArgs::try_parse_from(["mlp", "--steps"]).is_err());
    }
}

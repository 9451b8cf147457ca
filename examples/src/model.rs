//! The two built-in workloads behind one type: a seeded model, its parameters and its data.

use std::fmt;
use std::str::FromStr;

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::{VarBuilder, VarMap};

use crate::data::{self, Batch};
use crate::init::seed_varmap;
use crate::llama::{Llama, LlamaConfig};
use crate::mlp::{Mlp, MlpConfig};

/// Which built-in model to train.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModelKind {
    /// The llama-style causal language model ([`crate::llama`]), the default.
    #[default]
    Llama,
    /// The 784-512-512-10 MLP ([`crate::mlp`]).
    Mlp,
}

impl ModelKind {
    /// The lowercase name used on the command line and as the trace entrypoint prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelKind::Llama => "llama",
            ModelKind::Mlp => "mlp",
        }
    }
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ModelKind {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "llama" => Ok(ModelKind::Llama),
            "mlp" => Ok(ModelKind::Mlp),
            other => Err(format!("unknown model `{other}` (expected llama or mlp)")),
        }
    }
}

/// Sizes of both models; only the one selected by [`ModelKind`] is used.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelSizes {
    /// Llama sizes.
    pub llama: LlamaConfig,
    /// MLP sizes.
    pub mlp: MlpConfig,
}

enum Net {
    Llama(Llama),
    Mlp(Mlp),
}

/// A seeded model with its `VarMap` (parameters named as in candle-nn) and its data stream.
pub struct Workload {
    kind: ModelKind,
    sizes: ModelSizes,
    seed: u64,
    device: Device,
    varmap: VarMap,
    net: Net,
}

impl Workload {
    /// Builds the model on `device` and overwrites every parameter from `seed`
    /// ([`seed_varmap`]).
    ///
    /// # Errors
    /// Candle errors (invalid sizes, device errors).
    pub fn new(kind: ModelKind, sizes: ModelSizes, seed: u64, device: &Device) -> Result<Self> {
        Self::with_varmap(kind, sizes, seed, device, VarMap::new())
    }

    /// Like [`Workload::new`], with the parameters in `varmap` (e.g. one already given to the
    /// profiler's run config).
    ///
    /// # Errors
    /// Candle errors (invalid sizes, device errors).
    pub fn with_varmap(
        kind: ModelKind,
        sizes: ModelSizes,
        seed: u64,
        device: &Device,
        varmap: VarMap,
    ) -> Result<Self> {
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
        let net = match kind {
            ModelKind::Llama => Net::Llama(Llama::new(&sizes.llama, vb)?),
            ModelKind::Mlp => Net::Mlp(Mlp::new(&sizes.mlp, vb)?),
        };
        seed_varmap(&varmap, seed)?;
        Ok(Self {
            kind,
            sizes,
            seed,
            device: device.clone(),
            varmap,
            net,
        })
    }

    /// Which model this is.
    pub fn kind(&self) -> ModelKind {
        self.kind
    }

    /// The parameters.
    pub fn varmap(&self) -> &VarMap {
        &self.varmap
    }

    /// Parameter names, sorted.
    pub fn parameter_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .varmap
            .data()
            .lock()
            .expect("VarMap lock poisoned")
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// Total number of parameter elements.
    pub fn parameter_count(&self) -> usize {
        self.varmap.all_vars().iter().map(|v| v.elem_count()).sum()
    }

    /// The batch of one-based step `step` (different per step, the same for the same seed).
    ///
    /// # Errors
    /// Candle errors building the tensors.
    pub fn batch(&self, step: u64) -> Result<Batch> {
        match self.kind {
            ModelKind::Llama => {
                let c = &self.sizes.llama;
                data::token_batch(
                    c.vocab_size,
                    c.batch_size,
                    c.seq_len,
                    self.seed,
                    step,
                    &self.device,
                )
            }
            ModelKind::Mlp => {
                let c = &self.sizes.mlp;
                data::prototype_batch(
                    c.input_size,
                    c.num_classes,
                    c.batch_size,
                    self.seed,
                    step,
                    &self.device,
                )
            }
        }
    }

    /// The device the model lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The scalar training loss of `batch`.
    ///
    /// # Errors
    /// Candle errors (shape mismatches).
    pub fn loss(&self, batch: &Batch) -> Result<Tensor> {
        match &self.net {
            Net::Llama(m) => m.loss(&batch.inputs, &batch.targets),
            Net::Mlp(m) => m.loss(&batch.inputs, &batch.targets),
        }
    }

    /// [`Workload::loss`] with `rounds` of extra work on the llama model's logits (`exp` then
    /// `log`, an identity that costs an `exp`, a `log` and their backward arms per round): the
    /// seeded op slowdown of `demo --seed-slowdown-after`. 0 rounds is [`Workload::loss`]; the
    /// MLP ignores `rounds`.
    ///
    /// # Errors
    /// Candle errors (shape mismatches).
    pub fn loss_slowed(&self, batch: &Batch, rounds: usize) -> Result<Tensor> {
        match &self.net {
            Net::Llama(m) if rounds > 0 => m.loss_slowed(&batch.inputs, &batch.targets, rounds),
            _ => self.loss(batch),
        }
    }
}

//! The probe's cost on one training update, armed against disarmed, measured in pairs in one
//! process on the run's device.
//!
//! Each timed update is the instrumented loop body ([`crate::train`]'s step: step guard, batch
//! facts, loss statistics, `ProbedOptimizer::backward_step`) on a freshly built seeded model,
//! AdamW and profiler (a session captures one step, so every armed update needs its own; the
//! disarmed arm gets the same fresh setup so both do identical work):
//! - **armed**: the session captures this update (spans, module spans, storage capture, gradient
//!   facts, device samples, device synchronisation at the measured region's ends), writing to
//!   `std::io::sink()`;
//! - **disarmed**: the same loop with the probe installed but not capturing this update (one
//!   relaxed atomic load per probe entry point).
//!
//! The clock brackets only the update: `Device::synchronize` runs before starting it and after
//! it, so queued GPU work is inside the figure. Model building, AdamW construction and
//! `finish()` stay outside. Pairs alternate their order (armed first on odd pairs) and one
//! untimed warm-up pair runs first (kernel loading, cuBLAS handles). The figure to quote is the
//! median of the per-pair ratios `armed ÷ disarmed` with their range.

use std::time::Instant;

use candle_core::Device;
use candle_nn::{AdamW, Optimizer, VarMap};
use trace_probe::{DeviceLabel, ProbeError, ProbedOptimizer, ProfileRun};

use crate::model::Workload;
use crate::train::{adamw, train_step, TrainConfig, TrainError};

/// Paired update times of one model on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct OverheadReport {
    /// Device label (`cpu`, `cuda:0`, …).
    pub device: String,
    /// Per pair: (disarmed ns, armed ns), in run order.
    pub pairs: Vec<(u64, u64)>,
}

impl OverheadReport {
    /// `armed ÷ disarmed` per pair (pairs with a zero disarmed time are left out).
    pub fn ratios(&self) -> Vec<f64> {
        self.pairs
            .iter()
            .filter(|(d, _)| *d > 0)
            .map(|(d, a)| *a as f64 / *d as f64)
            .collect()
    }

    /// Median of [`Self::ratios`]; `None` without pairs.
    pub fn median_ratio(&self) -> Option<f64> {
        median(self.ratios())
    }

    /// `(min, max)` of [`Self::ratios`]; `None` without pairs.
    pub fn ratio_range(&self) -> Option<(f64, f64)> {
        let r = self.ratios();
        let min = r.iter().copied().reduce(f64::min)?;
        let max = r.iter().copied().reduce(f64::max)?;
        Some((min, max))
    }

    /// Median disarmed update time, ns.
    pub fn median_disarmed_ns(&self) -> Option<f64> {
        median(self.pairs.iter().map(|p| p.0 as f64).collect())
    }

    /// Median armed update time, ns.
    pub fn median_armed_ns(&self) -> Option<f64> {
        median(self.pairs.iter().map(|p| p.1 as f64).collect())
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Times `pairs` armed/disarmed pairs of one update of `config`'s model on `config.device`
/// (`config.out_dir`, `steps` and `capture_step` are not used: nothing is written).
///
/// # Errors
/// [`TrainError::InvalidConfig`] for zero pairs, [`TrainError::Device`], Candle and probe
/// errors.
pub fn measure_overhead(config: &TrainConfig, pairs: usize) -> Result<OverheadReport, TrainError> {
    if pairs == 0 {
        return Err(TrainError::InvalidConfig("0 overhead pairs".to_string()));
    }
    let device = config.device.open().map_err(TrainError::Device)?;
    // One untimed warm-up pair.
    time_update(config, &device, false)?;
    time_update(config, &device, true)?;
    let mut out = Vec::with_capacity(pairs);
    for i in 0..pairs {
        let armed_first = i % 2 == 1;
        let first = time_update(config, &device, armed_first)?;
        let second = time_update(config, &device, !armed_first)?;
        out.push(if armed_first {
            (second, first)
        } else {
            (first, second)
        });
    }
    Ok(OverheadReport {
        device: DeviceLabel::of(&device).to_string(),
        pairs: out,
    })
}

/// One timed update on a fresh model, AdamW and profiler; armed or not.
fn time_update(config: &TrainConfig, device: &Device, armed: bool) -> Result<u64, TrainError> {
    const STEP: u64 = 1;
    // A disarmed profiler is configured for a step the loop never reaches, and does not track
    // storages before it (that would arm the allocator hook).
    let capture_step = if armed { STEP } else { u64::MAX };
    let varmap = VarMap::new();
    let profiler = ProfileRun::training(config.entrypoint(), capture_step)
        .track_pre_existing(armed)
        .device(device)
        .varmap(&varmap)
        .tag("model", config.model.as_str())
        .tag("seed", config.seed.to_string())
        .start_with_writer(std::io::sink())?;
    let sync = |what: &'static str| {
        device.synchronize().map_err(|source| TrainError::Candle {
            context: format!("overhead: synchronizing {what}"),
            source,
        })
    };
    let (elapsed, finished) = {
        let work = Workload::with_varmap(
            config.model,
            config.sizes.clone(),
            config.seed,
            device,
            varmap,
        )
        .map_err(|source| TrainError::Candle {
            context: "overhead: building the model".to_string(),
            source,
        })?;
        let mut opt = ProbedOptimizer::<AdamW>::new(work.varmap().all_vars(), adamw(config))
            .map_err(|source| TrainError::Candle {
                context: "overhead: building the optimizer".to_string(),
                source,
            })?;
        let batch = work.batch(STEP).map_err(|source| TrainError::Candle {
            context: "overhead: building the batch".to_string(),
            source,
        })?;
        sync("before the update")?;
        let start = Instant::now();
        let step = train_step(&profiler, &work, &mut opt, &batch, (STEP, 0), config.update);
        let after = sync("after the update");
        let elapsed = start.elapsed();
        step?;
        after?;
        drop(opt);
        drop(work);
        (elapsed, profiler.finish())
    };
    match finished {
        Ok(_) => {}
        Err(ProbeError::CaptureStepNotReached { .. }) if !armed => {}
        Err(e) => return Err(e.into()),
    }
    Ok(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_median_and_range() {
        let r = OverheadReport {
            device: "cpu".into(),
            pairs: vec![(100, 110), (100, 90), (0, 5), (200, 220)],
        };
        assert_eq!(r.ratios(), vec![1.1, 0.9, 1.1]);
        assert_eq!(r.median_ratio(), Some(1.1));
        assert_eq!(r.ratio_range(), Some((0.9, 1.1)));
        assert_eq!(r.median_disarmed_ns(), Some(100.0));
        let empty = OverheadReport {
            device: "cpu".into(),
            pairs: vec![],
        };
        assert_eq!(empty.median_ratio(), None);
        assert_eq!(empty.ratio_range(), None);
    }
}

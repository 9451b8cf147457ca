//! Real training steps of both built-in models (no probe): the loss goes down and every
//! parameter receives a finite, non-zero gradient.

use candle_core::{Device, Result};
use candle_graph_examples::{ModelKind, ModelSizes, Workload};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};

fn losses(kind: ModelKind, steps: u64, lr: f64) -> Result<Vec<f32>> {
    let work = Workload::new(kind, ModelSizes::default(), 7, &Device::Cpu)?;
    let mut opt = AdamW::new(
        work.varmap().all_vars(),
        ParamsAdamW {
            lr,
            ..Default::default()
        },
    )?;
    let mut out = Vec::new();
    for step in 1..=steps {
        let loss = work.loss(&work.batch(step)?)?;
        out.push(loss.to_scalar::<f32>()?);
        opt.backward_step(&loss)?;
    }
    Ok(out)
}

fn assert_decreases(losses: &[f32]) {
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    let first = losses[0];
    let last = *losses.last().unwrap();
    assert!(last < first * 0.9, "loss did not decrease: {losses:?}");
}

#[test]
fn llama_loss_decreases() -> Result<()> {
    assert_decreases(&losses(ModelKind::Llama, 8, 1e-2)?);
    Ok(())
}

#[test]
fn mlp_loss_decreases() -> Result<()> {
    assert_decreases(&losses(ModelKind::Mlp, 5, 1e-3)?);
    Ok(())
}

fn assert_every_parameter_has_a_gradient(kind: ModelKind) -> Result<()> {
    let work = Workload::new(kind, ModelSizes::default(), 7, &Device::Cpu)?;
    let grads = work.loss(&work.batch(1)?)?.backward()?;
    let names = work.parameter_names();
    let vars = work.varmap().data().lock().unwrap();
    assert!(!names.is_empty());
    for name in &names {
        let grad = grads
            .get(vars[name].as_tensor())
            .unwrap_or_else(|| panic!("{kind}: no gradient for {name}"));
        let norm = grad.sqr()?.sum_all()?.sqrt()?.to_scalar::<f32>()?;
        assert!(norm.is_finite() && norm > 0.0, "{kind}: {name} norm {norm}");
    }
    Ok(())
}

#[test]
fn llama_every_parameter_gets_a_gradient() -> Result<()> {
    assert_every_parameter_has_a_gradient(ModelKind::Llama)
}

#[test]
fn mlp_every_parameter_gets_a_gradient() -> Result<()> {
    assert_every_parameter_has_a_gradient(ModelKind::Mlp)
}

#[test]
fn llama_names_follow_candle_conventions() -> Result<()> {
    let work = Workload::new(ModelKind::Llama, ModelSizes::default(), 7, &Device::Cpu)?;
    let names = work.parameter_names();
    // embedding + 2 layers × (2 norms + 4 attention + 3 mlp) + final norm + lm_head
    assert_eq!(names.len(), 1 + 2 * 9 + 2);
    assert!(names.contains(&"model.layers.1.self_attn.q_proj.weight".to_string()));
    assert!(names.contains(&"lm_head.weight".to_string()));
    Ok(())
}

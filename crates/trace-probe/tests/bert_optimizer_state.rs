//! A tiny random-weight candle-transformers BERT with a trainable head, profiled with the
//! tracking allocator (storages recorded) and the tracing layer, trained with AdamW. Candle
//! 0.11.1's LayerNorm on a contiguous input with a bias calls `ops::layer_norm`, a custom op
//! without a backward: every BERT parameter gets no gradient, the head's get one. AdamW still
//! keeps two moments for each: the state rows name their parameter (`optimizer state ·
//! encoder.layer.0.attention.self.query.weight (m)`, its shape and dtype), and
//! `optimizer_state_without_gradient` gives exactly the bytes of the BERT parameters' moments.

#[path = "support/tiny_bert.rs"]
mod tiny_bert;

use tiny_bert::tiny_config;

use std::collections::{BTreeMap, BTreeSet};

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use candle_transformers::models::bert::BertModel;
use trace_graph::FindingCode;
use trace_probe::{MemoryCategory, Pass, ProbedOptimizer, ProfileRun, TraceSession, Tracking};
use trace_schema::labels::parse_optimizer_state_label;
use trace_schema::{GradientState, MemoryAction};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{filter::LevelFilter, Layer, Registry};

#[global_allocator]
static ALLOC: Tracking = Tracking::system_counting();

#[test]
fn adamw_moments_of_a_bert_cut_by_layer_norm() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let varmap = VarMap::new();
    let run = ProfileRun::training("bert::train_step", 2).varmap(&varmap);
    let session = TraceSession::create(run, &path)?;
    let subscriber = Registry::default().with(session.layer().with_filter(LevelFilter::TRACE));
    let _default = tracing::subscriber::set_default(subscriber);

    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let model = BertModel::load(vb.clone(), &tiny_config())?;
    let head = candle_nn::linear(16, 3, vb.pp("head"))?;
    let mut opt =
        ProbedOptimizer::<AdamW>::for_session(&session, varmap.all_vars(), ParamsAdamW::default())?;
    let ids = Tensor::new(&[[1u32, 5, 7, 9, 2, 0], [3, 4, 8, 2, 0, 0]], &Device::Cpu)?;
    let types = ids.zeros_like()?;
    for step in 1..=2 {
        let _step = session.step(step);
        let logits = {
            let _fwd = session.pass(Pass::Forward);
            let hidden = model.forward(&ids, &types, None)?;
            head.forward(&hidden.mean(1)?)?
        };
        let loss = candle_nn::ops::log_softmax(&logits, D::Minus1)?.mean_all()?;
        opt.backward_step(&loss)?;
    }
    session.finish()?;

    // the parameters and their bytes, from the VarMap itself
    let params: BTreeMap<String, (Vec<u64>, u64)> = varmap
        .data()
        .lock()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let shape: Vec<u64> = v.dims().iter().map(|&d| d as u64).collect();
            (k.clone(), (shape, (v.elem_count() * 4) as u64))
        })
        .collect();
    let bert: Vec<&String> = params.keys().filter(|k| !k.starts_with("head.")).collect();
    assert_eq!(params.len() - bert.len(), 2, "head.weight and head.bias");

    let doc = trace_schema::load_path(&path)?;
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    // the gradient facts: the head trains, BERT does not
    for g in doc.gradients.iter().filter(|g| g.parameter) {
        let key = g.key.as_str();
        let expected = if key.starts_with("head.") {
            GradientState::Present
        } else {
            GradientState::Missing
        };
        assert_eq!(g.state, expected, "{key}");
    }

    // every optimizer-state storage live at capture start names its parameter and slot, with
    // the parameter's shape, dtype and bytes: m and v for each parameter
    let mut slots: BTreeSet<(String, String)> = BTreeSet::new();
    for m in doc
        .memory
        .iter()
        .filter(|m| m.action == MemoryAction::Alloc && m.pre_existing)
        .filter(|m| m.category == MemoryCategory::Optimizer)
    {
        let label = doc.str(m.label.expect("a label"));
        let tied = parse_optimizer_state_label(label).unwrap_or_else(|| panic!("{label}"));
        let (shape, bytes) = &params[tied.parameter];
        assert_eq!(m.bytes, Some(*bytes), "{label}");
        assert_eq!(
            m.shape.map(|s| doc.shape(s).to_vec()).as_ref(),
            Some(shape),
            "{label}"
        );
        assert_eq!(m.dtype.map(|d| doc.str(d)), Some("f32"), "{label}");
        assert!(slots.insert((tied.parameter.to_string(), tied.slot.to_string())));
    }
    let expected: BTreeSet<(String, String)> = params
        .keys()
        .flat_map(|k| [(k.clone(), "m".to_string()), (k.clone(), "v".to_string())])
        .collect();
    assert_eq!(slots, expected);

    // the finding: exactly the two moments of every BERT parameter
    let analysis = trace_graph::analyze(&doc);
    let state = analysis
        .findings
        .iter()
        .find(|f| f.code == FindingCode::OptimizerStateWithoutGradient)
        .unwrap_or_else(|| panic!("{:#?}", analysis.findings));
    let moments: u64 = bert.iter().map(|k| 2 * params[*k].1).sum();
    let all_state: u64 = params.values().map(|(_, b)| 2 * b).sum();
    assert_eq!(state.evidence.bytes, Some(moments), "{}", state.summary);
    assert_eq!(state.evidence.of_bytes, Some(all_state));
    assert_eq!(
        (state.evidence.count, state.evidence.of_count),
        (Some(bert.len() as u64), Some(params.len() as u64))
    );
    assert!(
        state.summary.contains(&format!(
            "for the {} parameters that received no gradient (two moments per parameter",
            bert.len()
        )),
        "{}",
        state.summary
    );
    eprintln!(
        "bert: {} of {} parameters without gradient, {moments} B of AdamW moments: {}",
        bert.len(),
        params.len(),
        state.summary
    );
    // and the cut: the last layer norm of the forward, whose op has no backward
    let cut = analysis
        .findings
        .iter()
        .find(|f| f.code == FindingCode::ParametersWithoutGradient)
        .expect("the cut");
    assert_eq!(
        cut.evidence.module.as_deref(),
        Some("encoder.layer.1.output.LayerNorm"),
        "{}",
        cut.summary
    );
    Ok(())
}

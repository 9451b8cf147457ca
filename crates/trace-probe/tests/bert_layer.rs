//! A tiny random-weight candle-transformers BERT profiled through the tracing layer, installed
//! with a thread-scoped default before the model is built. Backward through BERT in Candle
//! 0.11.1 yields no gradients (its fast layer-norm has no backward): every parameter must be
//! reported `missing`, the trace must stay structurally valid and trace-graph must say so.

#[path = "support/tiny_bert.rs"]
mod tiny_bert;

use tiny_bert::tiny_config;

use candle_core::{DType, Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use candle_transformers::models::bert::BertModel;
use trace_probe::{Pass, ProbedOptimizer, ProfileRun, SpanKind, TraceSession};
use trace_schema::GradientState;
use tracing_subscriber::layer::{Identity, SubscriberExt};
use tracing_subscriber::{filter::LevelFilter, Layer, Registry};

#[test]
fn bert_module_spans_and_missing_gradients() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let varmap = VarMap::new();
    let run = ProfileRun::training("bert::train_step", 2).varmap(&varmap);
    let session = TraceSession::create(run, &path)?;
    // Installed before the model is built: candle-transformers creates its spans in `load`.
    // Per-layer filters: another layer at INFO does not hide the TRACE spans from the probe.
    let subscriber = Registry::default()
        .with(session.layer().with_filter(LevelFilter::TRACE))
        .with(Identity::new().with_filter(LevelFilter::INFO));
    let _default = tracing::subscriber::set_default(subscriber);

    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let model = BertModel::load(vb, &tiny_config())?;
    let mut opt =
        ProbedOptimizer::<AdamW>::for_session(&session, varmap.all_vars(), ParamsAdamW::default())?;
    let ids = Tensor::new(&[[1u32, 5, 7, 9, 2, 0], [3, 4, 8, 2, 0, 0]], &Device::Cpu)?;
    let types = ids.zeros_like()?;
    for step in 1..=2 {
        let _step = session.step(step);
        let out = {
            let _fwd = session.pass(Pass::Forward);
            model.forward(&ids, &types, None)?
        };
        let loss = out.sqr()?.mean_all()?;
        opt.backward_step(&loss)?;
    }
    session.finish()?;

    let doc = trace_schema::load_path(&path)?;
    assert!(doc.semantic_issues.is_empty(), "{:?}", doc.semantic_issues);
    assert_eq!(doc.spans.iter().filter(|s| s.parent.is_none()).count(), 1);
    let modules: Vec<_> = doc
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Module)
        .collect();
    assert!(modules.len() > 20, "{} module spans", modules.len());
    let paths: Vec<&str> = modules
        .iter()
        .map(|s| doc.str(s.module_path.expect("module path")))
        .collect();
    assert!(paths.iter().all(|p| p.starts_with("model")), "{paths:?}");
    // candle-transformers' layers are named after the VarBuilder prefix of their parameters
    // (their tracing name is the module kind); the blocks around them after the prefix their
    // layers' names share, learned from the warm-up step (the encoder's `encoder.layer`, the
    // attention's `encoder.layer.1.attention`); a block around one layer (`inter`) or none
    // (`softmax`), and one whose layers share nothing (`model`), keep their tracing names.
    for path in [
        "model/encoder.layer/encoder.layer.1/encoder.layer.1.attention/encoder.layer.1.attention.self",
        "model/encoder.layer/encoder.layer.0/encoder.layer.0.attention/encoder.layer.0.attention.self/encoder.layer.0.attention.self.key",
        "model/encoder.layer/encoder.layer.1/encoder.layer.1.attention/encoder.layer.1.attention.self/encoder.layer.1.attention.self.value",
        "model/encoder.layer/encoder.layer.1/encoder.layer.1.attention/encoder.layer.1.attention.self/softmax",
        "model/encoder.layer/encoder.layer.1/encoder.layer.1.attention/encoder.layer.1.attention.output/encoder.layer.1.attention.output.LayerNorm",
        "model/encoder.layer/encoder.layer.1/inter/encoder.layer.1.intermediate.dense",
        "model/encoder.layer/encoder.layer.1/encoder.layer.1.output/encoder.layer.1.output.LayerNorm",
        // the embeddings (no spans of their own) are not the layer norm's
        "model/embeddings/embeddings.LayerNorm",
    ] {
        assert!(paths.contains(&path), "{path} in {paths:?}");
    }
    assert!(!paths.iter().any(|p| p.ends_with("/linear")), "{paths:?}");
    assert!(!paths.iter().any(|p| p.contains('#')), "{paths:?}");
    let block = modules
        .iter()
        .find(|s| doc.str(s.name) == "encoder.layer.1")
        .expect("the second encoder layer");
    assert_eq!(block.module_kind.map(|k| doc.str(k)), Some("layer"));
    let query = modules
        .iter()
        .find(|s| doc.str(s.name) == "encoder.layer.0.attention.self.query")
        .expect("the query linear");
    assert_eq!(query.module_kind.map(|k| doc.str(k)), Some("linear"));
    let forward = doc
        .spans
        .iter()
        .find(|s| s.pass == Some(Pass::Forward))
        .unwrap();
    let top = modules
        .iter()
        .find(|s| doc.str(s.name) == "model")
        .expect("model span");
    assert_eq!(top.parent, Some(forward.id));
    assert!(modules
        .iter()
        .all(|s| s.instance_key.is_some() && s.duration_ns.is_some()));

    let params: Vec<_> = doc.gradients.iter().filter(|g| g.parameter).collect();
    assert_eq!(params.len(), varmap.all_vars().len());
    assert!(params.iter().all(|g| g.state == GradientState::Missing));

    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.health.structurally_valid,
        "{:#?}",
        analysis.health.issues
    );
    assert_eq!(analysis.gradients.without_gradient.len(), params.len());
    let finding = |code| {
        analysis
            .findings
            .iter()
            .find(|f| f.code == code)
            .unwrap_or_else(|| panic!("{code:?} in {:#?}", analysis.findings))
    };
    // the gradient stops at the last layer norm of the forward: the layer named after it
    let cut = finding(trace_graph::FindingCode::ParametersWithoutGradient);
    assert_eq!(
        cut.evidence.module.as_deref(),
        Some("encoder.layer.1.output.LayerNorm"),
        "{}",
        cut.summary
    );
    assert!(
        cut.summary
            .contains("the gradient stops at module encoder.layer.1.output.LayerNorm"),
        "{}",
        cut.summary
    );
    // this test records no storages (no tracking allocator): no optimizer state is in the
    // trace, so no figure is given for the moments of the parameters without a gradient
    assert!(!analysis
        .findings
        .iter()
        .any(|f| f.code == trace_graph::FindingCode::OptimizerStateWithoutGradient));
    Ok(())
}

#[test]
fn blocks_first_called_in_the_capture_keep_their_tracing_names(
) -> Result<(), Box<dyn std::error::Error>> {
    // the capture is the first step: no call before it named the blocks, and names do not
    // change inside a capture
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("trace.jsonl");
    let varmap = VarMap::new();
    let session = TraceSession::create(ProfileRun::inference("bert", 1).varmap(&varmap), &path)?;
    let subscriber = Registry::default().with(session.layer().with_filter(LevelFilter::TRACE));
    let _default = tracing::subscriber::set_default(subscriber);
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let model = BertModel::load(vb, &tiny_config())?;
    let ids = Tensor::new(&[[1u32, 5, 7]], &Device::Cpu)?;
    for step in 1..=2 {
        let _step = session.step(step);
        model.forward(&ids, &ids.zeros_like()?, None)?;
    }
    session.finish()?;
    let doc = trace_schema::load_path(&path)?;
    let paths: Vec<&str> = doc
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Module)
        .filter_map(|s| s.module_path.map(|p| doc.str(p)))
        .collect();
    for path in [
        "model/encoder/layer#2/attn/self-attn/encoder.layer.1.attention.self.query",
        "model/encoder/layer/out/encoder.layer.0.output.LayerNorm",
    ] {
        assert!(paths.contains(&path), "{path} in {paths:?}");
    }
    Ok(())
}

#[test]
fn layer_outside_the_captured_step_records_nothing() -> Result<(), Box<dyn std::error::Error>> {
    let session = TraceSession::new(ProfileRun::inference("bert", 5), std::io::sink())?;
    let subscriber = Registry::default().with(session.layer().with_filter(LevelFilter::TRACE));
    let _default = tracing::subscriber::set_default(subscriber);
    let vb = VarBuilder::from_varmap(&VarMap::new(), DType::F32, &Device::Cpu);
    let model = BertModel::load(vb, &tiny_config())?;
    let ids = Tensor::new(&[[1u32, 5, 7]], &Device::Cpu)?;
    model.forward(&ids, &ids.zeros_like()?, None)?;
    assert!(!session.is_capturing());
    assert!(matches!(
        session.finish(),
        Err(trace_probe::ProbeError::CaptureStepNotReached { step: 5 })
    ));
    Ok(())
}

//! The Parquet tables of synthetic traces, read back with arrow-rs: every memory event is a
//! row, the running sum of `live_delta_bytes` in apply order reaches each trace's logical peak
//! (and each device's) exactly, and the README documents the schema as written.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use arrow_array::{Array, Int64Array, StringArray, UInt64Array};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use trace_synth::{write_synth_trace, SynthConfig};

fn column<'a, T: 'static>(batch: &'a arrow_array::RecordBatch, name: &str) -> &'a T {
    batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("column {name}"))
        .as_any()
        .downcast_ref::<T>()
        .unwrap_or_else(|| panic!("type of {name}"))
}

#[test]
fn running_sums_of_the_memory_events_reach_every_peak() {
    let tmp = tempfile::tempdir().unwrap();
    let mut analysed = Vec::new();
    for (seed, devices) in [(1u64, 1u32), (2, 3)] {
        let path = tmp.path().join(format!("t{seed}.jsonl"));
        let config = SynthConfig {
            memory_events: 5_000,
            spans: 200,
            ops: 500,
            devices,
            seed,
            ..SynthConfig::default()
        };
        write_synth_trace(&path, &config).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        // give each its own run id
        let text = text.replacen("\"run_id\":\"", &format!("\"run_id\":\"s{seed}-"), 1);
        std::fs::write(&path, text).unwrap();
        let doc = trace_schema::load_path(&path).unwrap();
        let analysis = trace_graph::analyze(&doc);
        analysed.push((path, doc, analysis));
    }
    let out = tmp.path().join("tables");
    let mut export = trace_export::ParquetExport::create(&out).unwrap();
    for (path, doc, analysis) in &analysed {
        export
            .add(&path.display().to_string(), doc, analysis)
            .unwrap();
    }
    let written = export.finish().unwrap();
    assert_eq!(written.traces, 2);
    let rows: BTreeMap<String, u64> = written
        .tables
        .iter()
        .map(|(p, n)| (p.file_stem().unwrap().to_string_lossy().into_owned(), *n))
        .collect();
    assert_eq!(rows["runs"], 2);
    assert_eq!(rows["memory_events"], 10_000);
    assert_eq!(
        rows["spans"],
        analysed.iter().map(|a| a.1.spans.len() as u64).sum::<u64>()
    );
    // no temporary file is left
    assert!(std::fs::read_dir(&out).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".tmp")));

    // (run, device) → events (timestamp, index, delta)
    type Events = Vec<(u64, u64, i64)>;
    let mut events: BTreeMap<(String, String), Events> = BTreeMap::new();
    let file = File::open(out.join("memory_events.parquet")).unwrap();
    for batch in ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
    {
        let batch = batch.unwrap();
        let run = column::<StringArray>(&batch, "run_id");
        let device = column::<StringArray>(&batch, "device");
        let ts = column::<UInt64Array>(&batch, "timestamp_ns");
        let idx = column::<UInt64Array>(&batch, "event_index");
        let delta = column::<Int64Array>(&batch, "live_delta_bytes");
        assert_eq!(
            column::<arrow_array::UInt32Array>(&batch, "rank").null_count(),
            batch.num_rows()
        );
        for i in 0..batch.num_rows() {
            events
                .entry((run.value(i).to_string(), device.value(i).to_string()))
                .or_default()
                .push((ts.value(i), idx.value(i), delta.value(i)));
        }
    }
    let peak_of = |evs: &mut Vec<(u64, u64, i64)>| -> i64 {
        evs.sort_unstable();
        let (mut live, mut peak) = (0i64, 0i64);
        for e in evs.iter() {
            live += e.2;
            peak = peak.max(live);
        }
        peak
    };
    for (_, doc, analysis) in &analysed {
        let logical = analysis.memory.logical.as_ref().unwrap();
        let run = &doc.meta.run_id;
        let mut all: Vec<(u64, u64, i64)> = events
            .iter()
            .filter(|((r, _), _)| r == run)
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        assert_eq!(
            peak_of(&mut all) as u64,
            logical.peak.as_ref().unwrap().live_bytes,
            "{run}: global peak"
        );
        for d in &logical.by_device {
            let mut evs = events[&(run.clone(), d.device.clone())].clone();
            assert_eq!(
                peak_of(&mut evs) as u64,
                d.peak.as_ref().unwrap().live_bytes,
                "{run} {}: device peak",
                d.device
            );
        }
    }
}

#[test]
fn the_docs_document_the_schema_as_written() {
    // The README links the tables' page, docs/parquet.md, which holds the schema.
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/parquet.md"),
    )
    .unwrap();
    let schema = trace_export::schema_markdown();
    assert!(
        page.contains(&schema),
        "docs/parquet.md's Parquet schema differs from trace_export::schema_markdown(); paste:\n{schema}"
    );
}

/// The same run and rank twice (a file given twice, a copy of it) is refused, naming both: its
/// rows would count twice in every query keyed by run and rank. Nothing of the second is written.
#[test]
fn the_same_run_twice_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t.jsonl");
    let config = SynthConfig {
        memory_events: 500,
        spans: 20,
        ops: 50,
        ..SynthConfig::default()
    };
    write_synth_trace(&path, &config).unwrap();
    let doc = trace_schema::load_path(&path).unwrap();
    let analysis = trace_graph::analyze(&doc);
    let mut export = trace_export::ParquetExport::create(&tmp.path().join("tables")).unwrap();
    export.add("first.jsonl", &doc, &analysis).unwrap();
    let err = export.add("copy.jsonl", &doc, &analysis).unwrap_err();
    assert!(
        matches!(&err, trace_export::ExportError::DuplicateRun { trace, first, .. } if trace == "copy.jsonl" && first == "first.jsonl"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("already exported from first.jsonl"),
        "{err}"
    );
    let written = export.finish().unwrap();
    assert_eq!(written.traces, 1);
}

/// A trace whose live bytes overflow has no logical timeline: its memory rows carry a null
/// `live_delta_bytes` (unobserved), never a 0 that a running sum would read as "no change".
#[test]
fn without_a_logical_timeline_the_deltas_are_null() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t.jsonl");
    std::fs::write(
        &path,
        r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"2026-01-01T00:00:00.000Z"}
{"kind":"span_start","id":"s1","name":"e","start_ns":0,"span_kind":"function","measured":true}
{"kind":"memory","timestamp_ns":1,"action":"alloc","device":"cpu","storage_id":"a","bytes":18446744073709551615,"category":"activation","span_id":"s1"}
{"kind":"memory","timestamp_ns":2,"action":"alloc","device":"cpu","storage_id":"b","bytes":16,"category":"activation","span_id":"s1"}
{"kind":"span_end","id":"s1","duration_ns":3}
"#,
    )
    .unwrap();
    let doc = trace_schema::load_path(&path).unwrap();
    let analysis = trace_graph::analyze(&doc);
    assert!(
        analysis.memory.logical.is_none(),
        "overflowed: no logical plane"
    );
    let out = tmp.path().join("tables");
    let mut export = trace_export::ParquetExport::create(&out).unwrap();
    export.add("t.jsonl", &doc, &analysis).unwrap();
    export.finish().unwrap();
    let file = File::open(out.join("memory_events.parquet")).unwrap();
    let mut rows = 0;
    for batch in ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
    {
        let batch = batch.unwrap();
        let deltas: &Int64Array = column(&batch, "live_delta_bytes");
        assert_eq!(deltas.null_count(), deltas.len(), "every delta null");
        rows += deltas.len();
    }
    assert_eq!(rows, 2);
}

/// Every row of `table` in `dir`, in file order.
fn batches(dir: &Path, table: &str) -> Vec<arrow_array::RecordBatch> {
    let file = File::open(dir.join(format!("{table}.parquet"))).unwrap();
    ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

#[test]
fn a_document_with_its_memory_events_spilled_exports_the_same_tables() {
    // The CLI loads with the memory events spilled to a compact log (the export reads them back
    // in one pass): every table must be what the fully decoded document gives.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t.jsonl");
    let config = SynthConfig {
        memory_events: 20_000,
        spans: 400,
        ops: 2_000,
        devices: 3,
        steps: 4,
        ..SynthConfig::default()
    };
    write_synth_trace(&path, &config).unwrap();
    let export = |spill_memory: bool, out: &Path| {
        let options = trace_schema::LoadOptions {
            spill_memory,
            ..trace_schema::LoadOptions::default()
        };
        let doc = trace_schema::load_reader_with(File::open(&path).unwrap(), &options).unwrap();
        assert_eq!(
            doc.memory.is_empty(),
            spill_memory,
            "spilled: {spill_memory}"
        );
        assert_eq!(doc.memory_len(), 20_000);
        let analysis = trace_graph::analyze(&doc);
        let mut export = trace_export::ParquetExport::create(out).unwrap();
        export.add("t.jsonl", &doc, &analysis).unwrap();
        export.finish().unwrap()
    };
    let (decoded, spilled) = (tmp.path().join("decoded"), tmp.path().join("spilled"));
    let a = export(false, &decoded);
    let b = export(true, &spilled);
    assert_eq!(a.tables.len(), b.tables.len());
    for ((pa, na), (_, nb)) in a.tables.iter().zip(&b.tables) {
        let table = pa.file_stem().unwrap().to_string_lossy().into_owned();
        assert_eq!(na, nb, "{table}: rows");
        assert_eq!(
            batches(&decoded, &table),
            batches(&spilled, &table),
            "{table}: contents"
        );
    }
    assert_eq!(
        a.tables
            .iter()
            .find(|(p, _)| p.ends_with("memory_events.parquet"))
            .map(|t| t.1),
        Some(20_000)
    );
}

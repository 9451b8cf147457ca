//! Property tests: written-then-read equals the original for any valid trace/11 event sequence,
//! and any byte-prefix of a valid trace loads as truncated or fails cleanly.

use std::collections::BTreeMap;

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use trace_schema::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9_./:-]{0,8}",
        // Quotes, backslashes, control characters and non-ASCII must survive escaping.
        1 => any::<String>().prop_map(|s| s.chars().take(8).collect::<String>()),
    ]
}

fn finite() -> impl Strategy<Value = f64> {
    any::<f64>().prop_filter("finite", |x| x.is_finite())
}

fn shape() -> impl Strategy<Value = Vec<u64>> {
    vec(any::<u64>(), 0..4)
}

fn coverage() -> impl Strategy<Value = CoverageLevel> {
    prop_oneof![
        Just(CoverageLevel::None),
        Just(CoverageLevel::Partial),
        Just(CoverageLevel::Complete)
    ]
}

fn step() -> impl Strategy<Value = Pass> {
    prop_oneof![
        Just(Pass::Forward),
        Just(Pass::Backward),
        Just(Pass::Optimizer)
    ]
}

fn category() -> impl Strategy<Value = MemoryCategory> {
    proptest::sample::select(MemoryCategory::ALL.to_vec())
}

fn gradient_contract() -> impl Strategy<Value = GradientContract> {
    (
        text(),
        vec((text(), text(), text()), 0..3),
        vec(
            (
                text(),
                prop_oneof![
                    Just(GradientExpectation::Active),
                    Just(GradientExpectation::Inactive),
                    Just(GradientExpectation::DataConditional)
                ],
                any::<u64>(),
            ),
            0..3,
        ),
    )
        .prop_map(|(digest, expected, families)| GradientContract {
            manifest_sha256: digest,
            expected: expected
                .into_iter()
                .map(|(root, key, family)| ExpectedGradient { root, key, family })
                .collect(),
            families: families
                .into_iter()
                .map(
                    |(family, expectation, min_present)| GradientFamilyContract {
                        family,
                        expectation,
                        min_present,
                    },
                )
                .collect(),
        })
}

fn capture_contract() -> impl Strategy<Value = CaptureContract> {
    (
        prop_oneof![
            Just(MeasurementScope::Unknown),
            Just(MeasurementScope::ProfiledWork),
            Just(MeasurementScope::ProductionEquivalent)
        ],
        vec(coverage(), 8),
        option::of(gradient_contract()),
        vec(text(), 0..3),
        btree_map(
            prop_oneof![
                text(),
                Just("logical_memory".to_string()),
                Just("tensor_stats".to_string())
            ]
            .prop_map(ReasonKey::from),
            text(),
            0..3,
        ),
    )
        .prop_map(
            |(scope, c, gradient_contract, labels, reasons)| CaptureContract {
                measurement_scope: scope,
                operations: c[0],
                tensors: c[1],
                gradients: c[2],
                logical_memory: c[3],
                physical_memory: c[4],
                device_timing: c[5],
                tensor_stats: c[6],
                gradient_contract,
                required_semantic_labels: labels,
                reasons,
            },
        )
}

fn comparison_identity() -> impl Strategy<Value = ComparisonIdentity> {
    (
        option::of(text()),
        vec(text(), 7),
        any::<u64>(),
        any::<u64>(),
        option::of(text()),
    )
        .prop_map(
            |(implementation_id, s, physical_batch, accumulation_steps, pair_id)| {
                ComparisonIdentity {
                    implementation_id,
                    workload_id: s[0].clone(),
                    model_id: s[1].clone(),
                    config_id: s[2].clone(),
                    data_id: s[3].clone(),
                    seed_policy: s[4].clone(),
                    physical_batch,
                    accumulation_steps,
                    precision: s[5].clone(),
                    device_state: s[6].clone(),
                    pair_id,
                }
            },
        )
}

fn host() -> impl Strategy<Value = HostInfo> {
    (
        option::of(text()),
        option::of(text()),
        option::of(any::<u64>()),
        option::of(any::<u64>()),
    )
        .prop_map(|(os, arch, cpu_count, memory_bytes)| HostInfo {
            os,
            arch,
            cpu_count,
            memory_bytes,
        })
}

fn meta() -> impl Strategy<Value = TraceEvent> {
    (
        (text(), option::of(text()), text(), text()),
        (
            prop_oneof![Just(ExecutionPhase::Train), Just(ExecutionPhase::Infer)],
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            option::of(text()),
            any::<bool>(),
        ),
        (
            option::of(prop_oneof![
                Just(TimingMode::Host),
                Just(TimingMode::DeviceSynchronized)
            ]),
            option::of(capture_contract()),
            option::of(comparison_identity()),
            btree_map(text(), text(), 0..3),
        ),
        (
            option::of(text()),
            option::of(text()),
            option::of(any::<bool>()),
            option::of(host()),
        ),
    )
        .prop_map(|(a, b, c, d)| {
            let (run_id, correlation_id, entrypoint, timestamp) = a;
            let (phase, capture_step, warmup_steps, device, synced) = b;
            let (timing_mode, capture_contract, comparison_identity, tags) = c;
            let (candle_version, probe_version, tracking_allocator_installed, host) = d;
            TraceEvent::Meta(MetaEvent {
                schema: WRITE_VERSION.as_str().to_string(),
                run: RunMeta {
                    run_id,
                    correlation_id,
                    entrypoint,
                    phase: Some(phase),
                    timestamp,
                    capture_step,
                    warmup_steps,
                    device,
                    measured_region_device_synchronized: synced,
                    timing_mode,
                    capture_contract,
                    comparison_identity,
                    tags: tags.into_iter().collect::<BTreeMap<_, _>>(),
                    candle_version,
                    probe_version,
                    tracking_allocator_installed,
                    host,
                    rank: None,
                    local_rank: None,
                    world_size: None,
                    last_capture_step: None,
                },
            })
        })
}

fn span_start() -> impl Strategy<Value = TraceEvent> {
    (
        (text(), option::of(text()), text(), any::<u64>()),
        (
            prop_oneof![
                Just(SpanKind::Function),
                Just(SpanKind::Op),
                Just(SpanKind::Module)
            ],
            any::<bool>(),
            option::of(step()),
            option::of(text()),
            option::of(text()),
            option::of(text()),
            option::of(text()),
        ),
    )
        .prop_map(
            |((id, parent_id, name, start_ns), (kind, measured, step, mp, ik, mk, fwd))| {
                TraceEvent::SpanStart(SpanStartEvent {
                    id,
                    parent_id,
                    name,
                    start_ns,
                    span_kind: kind,
                    measured,
                    step,
                    module_path: mp,
                    instance_key: ik,
                    module_kind: mk,
                    forward_span_id: fwd,
                    step_index: None,
                })
            },
        )
}

fn op() -> impl Strategy<Value = TraceEvent> {
    (
        (
            text(),
            text(),
            vec(text(), 0..3),
            option::of(text()),
            shape(),
        ),
        (
            prop_oneof![text(), Just("f32".to_string()), Just("f4".to_string())],
            text(),
            any::<u64>(),
            any::<u64>(),
            option::of(any::<u64>()),
            any::<u64>(),
        ),
    )
        .prop_map(|((span_id, op_name, inputs, output, shape), rest)| {
            let (dtype, device, duration_ns, timestamp_ns, output_dense_bytes, input) = rest;
            TraceEvent::Op(OpEvent {
                span_id,
                op_name,
                inputs,
                output,
                shape,
                dtype,
                device,
                duration_ns,
                timestamp_ns,
                output_dense_bytes,
                input_dense_bytes: input,
            })
        })
}

fn tensor() -> impl Strategy<Value = TraceEvent> {
    (
        (text(), text(), option::of(text()), shape(), text(), text()),
        (
            any::<bool>(),
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            option::of(text()),
            category(),
        ),
    )
        .prop_map(
            |((span_id, tensor_id, label, shape, dtype, device), rest)| {
                let (requires_grad, dense_bytes, storage_bytes, storage_id, category) = rest;
                TraceEvent::Tensor(TensorEvent {
                    span_id,
                    tensor_id,
                    label,
                    shape,
                    dtype,
                    device,
                    requires_grad,
                    dense_bytes,
                    storage_bytes,
                    storage_id,
                    category,
                })
            },
        )
}

fn tensor_stats() -> impl Strategy<Value = TraceEvent> {
    (
        (text(), text(), shape(), text(), any::<u64>(), any::<u64>()),
        vec(option::of(finite()), 5),
    )
        .prop_map(
            |((span_id, label, shape, dtype, elements, non_finite), f)| {
                TraceEvent::TensorStats(TensorStatsEvent {
                    span_id,
                    label,
                    shape,
                    dtype,
                    elements,
                    non_finite,
                    rms: f[0],
                    abs_max: f[1],
                    mean: f[2],
                    min: f[3],
                    max: f[4],
                })
            },
        )
}

fn memory() -> impl Strategy<Value = TraceEvent> {
    (
        (
            any::<u64>(),
            any::<bool>(),
            text(),
            option::of(text()),
            option::of(any::<u64>()),
            option::of(text()),
            option::of(text()),
        ),
        (
            option::of(text()),
            option::of(shape()),
            option::of(text()),
            category(),
            option::of(prop_oneof![
                Just(CategorySource::Declared),
                Just(CategorySource::Registry),
                Just(CategorySource::Inferred)
            ]),
            option::of(prop_oneof![
                Just(MemorySource::Allocator),
                Just(MemorySource::Registry),
                Just(MemorySource::Caller)
            ]),
            any::<bool>(),
            option::of(text()),
        ),
        any::<u64>(),
    )
        .prop_map(|(a, b, alloc_bytes)| {
            let (timestamp_ns, alloc, device, storage_id, bytes, tensor_id, span_id) = a;
            let (op_name, shape, dtype, category, category_source, source, pre, label) = b;
            let action = if alloc {
                MemoryAction::Alloc
            } else {
                MemoryAction::Free
            };
            TraceEvent::Memory(MemoryEvent {
                timestamp_ns,
                action,
                device,
                storage_id,
                // An alloc must carry its bytes.
                bytes: if alloc { Some(alloc_bytes) } else { bytes },
                logical_bytes: None,
                tensor_id,
                span_id,
                op_name,
                shape,
                dtype,
                category,
                category_source,
                source,
                pre_existing: pre,
                label,
                site: None,
                thread: None,
            })
        })
}

fn device_memory() -> impl Strategy<Value = TraceEvent> {
    (any::<u64>(), text(), vec(option::of(any::<u64>()), 5)).prop_map(
        |(timestamp_ns, device, f)| {
            TraceEvent::DeviceMemory(DeviceMemoryEvent {
                timestamp_ns,
                device,
                used_bytes: f[0],
                free_bytes: f[1],
                reserved_bytes: f[2],
                capacity_bytes: f[3],
                resident_bytes: f[4],
            })
        },
    )
}

fn device_interval() -> impl Strategy<Value = TraceEvent> {
    (vec(text(), 5), any::<u64>(), any::<u64>()).prop_map(|(s, start_ns, duration_ns)| {
        TraceEvent::DeviceInterval(DeviceIntervalEvent {
            span_id: s[0].clone(),
            device: s[1].clone(),
            stream_id: s[2].clone(),
            clock_id: s[3].clone(),
            backend: s[4].clone(),
            start_ns,
            duration_ns,
        })
    })
}

fn gradient() -> impl Strategy<Value = TraceEvent> {
    (
        (text(), text(), text()),
        prop_oneof![
            Just(GradientState::Present),
            Just(GradientState::Missing),
            Just(GradientState::Zero),
            Just(GradientState::NonFinite)
        ],
        option::of(finite()),
        any::<bool>(),
        option::of(text()),
        option::of(any::<u64>()),
        option::of(any::<u64>()),
    )
        .prop_map(
            |((event_id, root, key), state, norm, parameter, tensor_id, bytes, nf)| {
                TraceEvent::Gradient(GradientEvent {
                    event_id,
                    root,
                    key,
                    state,
                    norm,
                    parameter,
                    tensor_id,
                    bytes,
                    non_finite_elements: nf,
                })
            },
        )
}

fn edge() -> impl Strategy<Value = TraceEvent> {
    prop_oneof![
        (text(), text(), any::<u64>()).prop_map(|(from_span, to_span, host_duration_ns)| {
            TraceEvent::Edge(EdgeEvent::Call {
                from_span,
                to_span,
                host_duration_ns,
            })
        }),
        (text(), text()).prop_map(|(from_tensor, to_tensor)| {
            TraceEvent::Edge(EdgeEvent::Data {
                from_tensor,
                to_tensor,
            })
        }),
    ]
}

fn body_event() -> impl Strategy<Value = TraceEvent> {
    prop_oneof![
        span_start(),
        (text(), any::<u64>(), any::<bool>(), option::of(text())).prop_map(
            |(id, duration_ns, inferred, inferred_reason)| TraceEvent::SpanEnd(SpanEndEvent {
                id,
                duration_ns,
                inferred,
                inferred_reason,
            })
        ),
        op(),
        tensor(),
        tensor_stats(),
        memory(),
        device_memory(),
        device_interval(),
        gradient(),
        edge(),
        (any::<u64>(), any::<u64>()).prop_map(|(timestamp_ns, dropped_events)| {
            TraceEvent::DroppedEvents(DroppedEventsEvent {
                timestamp_ns,
                dropped_events,
            })
        }),
    ]
}

fn terminal() -> impl Strategy<Value = TraceEvent> {
    (
        prop_oneof![
            Just(TerminalOutcome::Complete),
            Just(TerminalOutcome::Failed)
        ],
        any::<u64>(),
        option::of(text()),
        option::of(any::<u64>()),
    )
        .prop_map(|(outcome, timestamp_ns, reason, dropped_events)| {
            TraceEvent::Terminal(TerminalEvent {
                coverage_lost: Default::default(),
                outcome,
                timestamp_ns,
                reason,
                dropped_events,
            })
        })
}

/// A valid trace/11 sequence: meta, body events, and (usually) a terminal.
fn trace() -> impl Strategy<Value = Vec<TraceEvent>> {
    (
        meta(),
        vec(body_event(), 0..24),
        option::weighted(0.8, terminal()),
    )
        .prop_map(|(meta, body, terminal)| {
            let mut events = vec![meta];
            events.extend(body);
            events.extend(terminal);
            events
        })
}

fn write(events: &[TraceEvent]) -> Vec<u8> {
    let mut writer = TraceWriter::new(Vec::new());
    for event in events {
        writer.write_event(event).unwrap();
    }
    writer.flush().unwrap();
    assert_eq!(writer.events_written(), events.len() as u64);
    writer.into_inner()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn written_then_read_equals_the_original(events in trace()) {
        let bytes = write(&events);
        prop_assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), events.len());
        let read: Vec<LineEvent> = TraceReader::new(bytes.as_slice())
            .collect::<Result<_, _>>()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let lines: Vec<u64> = read.iter().map(|e| e.line).collect();
        prop_assert_eq!(lines, (1..=events.len() as u64).collect::<Vec<_>>());
        let read: Vec<TraceEvent> = read.into_iter().map(|e| e.event).collect();
        prop_assert_eq!(&read, &events);
        // The document keeps every event, whatever semantic issues it has.
        let doc = load_reader(bytes.as_slice()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(doc.event_count, events.len() as u64);
        // Memory events take the loader's borrowed fast path: the records must hold exactly
        // what was written, in file order.
        let memory = |events: &[TraceEvent]| -> Vec<TraceEvent> {
            events.iter().filter(|e| matches!(e, TraceEvent::Memory(_))).cloned().collect()
        };
        prop_assert_eq!(memory(&doc.to_events()), memory(&events));
        // So do ops (strings with escapes fall back to the general path); the loader fills a
        // missing output_dense_bytes from shape × dtype.
        let ops = |events: &[TraceEvent], fill: bool| -> Vec<TraceEvent> {
            events
                .iter()
                .filter_map(|e| match e {
                    TraceEvent::Op(op) => {
                        let mut op = op.clone();
                        if fill && op.output_dense_bytes.is_none() {
                            op.output_dense_bytes = dense_bytes(&op.shape, &op.dtype);
                        }
                        Some(TraceEvent::Op(op))
                    }
                    _ => None,
                })
                .collect()
        };
        prop_assert_eq!(ops(&doc.to_events(), false), ops(&events, true));
        // A loaded document written back (`to_events`) loads to the same document.
        let again = load_reader(write(&doc.to_events()).as_slice())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(again.to_events(), doc.to_events());
        prop_assert_eq!(&again.truncation, &doc.truncation);
        prop_assert_eq!(doc.is_truncated(), !matches!(events.last(), Some(TraceEvent::Terminal(_))));
    }

    #[test]
    fn any_prefix_loads_as_truncated_or_fails_cleanly(
        events in trace(),
        cut in any::<proptest::sample::Index>(),
    ) {
        let bytes = write(&events);
        let has_terminal = matches!(events.last(), Some(TraceEvent::Terminal(_)));
        check_prefix(&bytes, cut.index(bytes.len() + 1), has_terminal)?;
        // Cuts right at a line end (the final line parses and is accepted) and right after it.
        let ends: Vec<usize> = bytes.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i).collect();
        let end = ends[cut.index(ends.len())];
        check_prefix(&bytes, end, has_terminal)?;
        check_prefix(&bytes, end + 1, has_terminal)?;
    }
}

/// What loading `bytes[..cut]` must give: the whole lines, plus a final line whose `\n` alone is
/// missing; a partial line dropped and reported; truncated unless the terminal is in; an error
/// only while the meta line is incomplete.
fn check_prefix(bytes: &[u8], cut: usize, has_terminal: bool) -> Result<(), TestCaseError> {
    let prefix = &bytes[..cut];
    let first_line_end = bytes.iter().position(|&b| b == b'\n').unwrap();
    let full_lines = prefix.iter().filter(|&&b| b == b'\n').count() as u64;
    let ends_on_newline = cut == 0 || prefix[cut - 1] == b'\n';
    let last_line_whole = !ends_on_newline && bytes.get(cut) == Some(&b'\n');
    match load_reader(prefix) {
        Ok(doc) => {
            prop_assert!(cut >= first_line_end, "meta must be whole");
            prop_assert_eq!(doc.event_count, full_lines + u64::from(last_line_whole));
            let complete = has_terminal && cut + 1 >= bytes.len();
            prop_assert_eq!(doc.is_truncated(), !complete);
            let partial = !ends_on_newline && !last_line_whole;
            let reported = doc.truncation.as_ref().and_then(|t| t.partial_line);
            prop_assert_eq!(reported, partial.then_some(full_lines + 1));
            if partial {
                let start = prefix
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                prop_assert_eq!(
                    doc.truncation.as_ref().unwrap().dropped_bytes,
                    (cut - start) as u64
                );
            }
        }
        Err(e) => {
            prop_assert!(matches!(e, LoadError::MissingMeta { .. }), "{}", e);
            prop_assert!(cut < first_line_end);
        }
    }
    Ok(())
}

#[test]
fn every_prefix_of_the_trace_11_fixture() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/trace_11.jsonl"
    ))
    .unwrap();
    for cut in 0..=bytes.len() {
        check_prefix(&bytes, cut, true).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
    }
}

#[test]
fn non_finite_floats_are_written_as_null_and_do_not_round_trip() {
    // Documented writer behaviour: serde_json writes NaN as null, which reads back as absent.
    let stats = TraceEvent::TensorStats(TensorStatsEvent {
        span_id: "s1".into(),
        label: "x".into(),
        shape: vec![1],
        dtype: "f32".into(),
        elements: 1,
        non_finite: 1,
        rms: Some(f64::NAN),
        abs_max: None,
        mean: None,
        min: None,
        max: None,
    });
    let bytes = write(&[stats]);
    assert_eq!(
        std::str::from_utf8(&bytes).unwrap(),
        "{\"kind\":\"tensor_stats\",\"span_id\":\"s1\",\"label\":\"x\",\"shape\":[1],\"dtype\":\"f32\",\"elements\":1,\"non_finite\":1,\"rms\":null}\n"
    );
}

/// Everything a loaded document holds, comparable (memory events through the accessor, so a
/// spilled document compares with an in-memory one).
fn fingerprint(doc: &TraceDocument) -> String {
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{}\n{:?}",
        doc.version,
        doc.to_events(),
        doc.semantic_issues,
        doc.truncation,
        doc.event_count,
        doc.dropped_events
    )
}

fn outcome(r: Result<TraceDocument, LoadError>) -> String {
    match r {
        Ok(doc) => fingerprint(&doc),
        Err(e) => format!("error: {e}"),
    }
}

/// The same event rewritten the way another producer might: keys sorted (so `kind` is not
/// first), spaces after `:` and `,`.
fn relayout(line: &[u8]) -> Vec<u8> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
        return line.to_vec();
    };
    let compact = serde_json::to_string(&value).unwrap(); // BTreeMap: sorted keys
    let mut out = String::new();
    let mut in_string = false;
    let mut escaped = false;
    for c in compact.chars() {
        out.push(c);
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c == ':' || c == ',' {
            out.push(' ');
        }
    }
    out.into_bytes()
}

/// Edits that break or bend a trace: swap two lines, drop one, relayout one, flip a byte,
/// insert a blank line, append junk without a newline.
#[derive(Debug, Clone)]
enum Edit {
    Swap(usize, usize),
    Drop(usize),
    Relayout(usize),
    Flip(usize, u8),
    Blank(usize),
    Tail(Vec<u8>),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        1 => any::<usize>().prop_map(Edit::Drop),
        3 => any::<usize>().prop_map(Edit::Relayout),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Edit::Flip(a, b)),
        1 => any::<usize>().prop_map(Edit::Blank),
        1 => vec(any::<u8>(), 0..12).prop_map(Edit::Tail),
    ]
}

fn apply(bytes: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    let last = lines.pop().unwrap_or_default(); // after the final newline
    let mut tail = last;
    for e in edits {
        let n = lines.len().max(1);
        match e {
            Edit::Swap(a, b) if !lines.is_empty() => lines.swap(a % n, b % n),
            Edit::Drop(a) if !lines.is_empty() => {
                lines.remove(a % n);
            }
            Edit::Relayout(a) if !lines.is_empty() => {
                let i = a % n;
                lines[i] = relayout(&lines[i]);
            }
            Edit::Flip(a, b) if !lines.is_empty() => {
                let l = &mut lines[a % n];
                if !l.is_empty() {
                    let j = (*a / n) % l.len();
                    l[j] = *b;
                }
            }
            Edit::Blank(a) => lines.insert(a % (lines.len() + 1), b"  ".to_vec()),
            Edit::Tail(t) => tail = t.clone(),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for l in lines {
        out.extend_from_slice(&l);
        out.push(b'\n');
    }
    out.extend_from_slice(&tail);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The chunked, parallel loader (any chunk size, parallel or not, memory spilled or not)
    /// gives the sequential reader's document, or its error, for any input — valid traces,
    /// traces written by another producer's layout, and broken ones.
    #[test]
    fn the_loader_agrees_with_the_sequential_reader(
        events in trace(),
        edits in vec(edit(), 0..4),
        chunk in prop_oneof![Just(1usize), 2usize..64, Just(256usize), Just(1 << 20)],
        parallel in any::<bool>(),
        spill in any::<bool>(),
        utf8 in any::<bool>(),
    ) {
        let bytes = apply(&write(&events), &edits);
        let reference = trace_schema::reader::load_reader_sequential(bytes.as_slice());
        let options = LoadOptions {
            spill_memory: spill,
            require_utf8: utf8,
            chunk_bytes: chunk,
            parallel,
            ..LoadOptions::default()
        };
        let got = load_reader_with(bytes.as_slice(), &options);
        let not_utf8 = std::str::from_utf8(&bytes).err().filter(|e| {
            bytes[e.valid_up_to()..].contains(&b'\n')
        });
        match (utf8, not_utf8) {
            (true, Some(e)) => {
                let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
                let want = format!("error: {}", LoadError::NotUtf8 { line, offset: e.valid_up_to() as u64 });
                prop_assert_eq!(outcome(got), want);
            }
            _ => prop_assert_eq!(outcome(got), outcome(reference)),
        }
    }
}

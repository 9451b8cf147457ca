//! Tests of the memory log: orders, runs, the window and the external sort, ids.

use super::*;

fn item(index: u32, ts: u64, id: &'static str) -> MemoryItem<'static> {
    MemoryItem {
        index,
        timestamp_ns: ts,
        bytes: (index % 3 != 0).then_some(index as u64 * 1000),
        device: Sym::from_index(index as usize % 2),
        storage: Some(id),
        tensor: (index % 2 == 0).then_some("t"),
        span: (index % 4 == 0).then(|| Sym::from_index(7)),
        op_name: None,
        shape: (index % 5 == 0).then(|| ShapeId::from_index(2)),
        dtype: None,
        label: (index % 7 == 0).then(|| Sym::from_index(300)),
        action: if index % 2 == 0 {
            MemoryAction::Alloc
        } else {
            MemoryAction::Free
        },
        category: category_of(index % 5),
        category_source: Some(CategorySource::Inferred),
        source: (index % 3 == 0).then_some(MemorySource::Caller),
        pre_existing: index % 11 == 0,
    }
}

/// `(index, timestamp)` of every record in `order`, each checked against [`item`].
fn collect(log: &MemoryLog, order: MemoryOrder) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    log.for_each(order, |m| {
        assert_eq!(m.storage.map(str::len), Some(3 + (m.index as usize % 5)));
        let mut want = item(m.index, m.timestamp_ns, "x");
        want.storage = m.storage;
        assert_eq!(*m, want);
        out.push((m.index, m.timestamp_ns));
    })
    .unwrap();
    out
}

fn ids() -> Vec<&'static str> {
    (0..5).map(|n| &"abcdefgh"[..3 + n]).collect()
}

fn check(timestamps: &[u64]) {
    let log = log_of(timestamps);
    let file = collect(&log, MemoryOrder::File);
    let want_file: Vec<(u32, u64)> = (0..timestamps.len() as u32)
        .zip(timestamps.iter().copied())
        .collect();
    assert_eq!(file, want_file);
    let mut want: Vec<(u64, u32)> = want_file.iter().map(|&(i, t)| (t, i)).collect();
    want.sort();
    let replay: Vec<(u64, u32)> = collect(&log, MemoryOrder::Replay)
        .into_iter()
        .map(|(i, t)| (t, i))
        .collect();
    assert_eq!(replay, want);
    // a second pass reads the sorted copy the first one made (when there was one to make)
    let again: Vec<(u64, u32)> = collect(&log, MemoryOrder::Replay)
        .into_iter()
        .map(|(i, t)| (t, i))
        .collect();
    assert_eq!(again, want);
    let copy = log.sorted_copy.get();
    assert_eq!(copy.is_some(), log.runs.len() > 1);
    assert!(copy.is_none_or(|c| c.runs.len() == 1));
    assert_eq!(collect(&log, MemoryOrder::File), want_file);
}

/// A log of `timestamps` (ids and fields as [`item`]) on disk past 4 KiB.
fn log_of(timestamps: &[u64]) -> MemoryLog {
    let ids = ids();
    let mut w = MemoryLogWriter::with_file_threshold(4096);
    for (i, &ts) in timestamps.iter().enumerate() {
        let mut m = item(i as u32, ts, "x");
        m.storage = Some(ids[i % 5]);
        w.push(&m).unwrap();
    }
    w.finish().unwrap()
}

/// Whether the window sorts `timestamps` (else the external sort does).
fn windowed(timestamps: &[u64]) -> bool {
    let log = log_of(timestamps);
    assert!(log.runs.len() > MAX_MERGED_RUNS);
    let mut out = MemoryLogWriter {
        with_index: true,
        ..MemoryLogWriter::with_file_threshold(4096)
    };
    log.sort_in_window(&mut out).unwrap()
}

#[test]
fn events_out_of_order_locally_are_sorted_in_a_window_else_externally() {
    // thousands of runs three records long, each record up to 30 ns behind the one before
    let local: Vec<u64> = (0..5000u64).map(|i| 100 + i * 10 - (i % 3) * 15).collect();
    assert!(windowed(&local));
    check(&local);
    // then runs back at the start of time, late in the file: the window would hold
    // nearly every record
    let mut far = local.clone();
    far.extend((0..200u64).map(|i| (i % 2) * 5));
    assert!(!windowed(&far));
    check(&far);
}

#[test]
fn file_and_replay_order_round_trip() {
    check(&[]);
    check(&[5]);
    check(&[1, 2, 2, 3, 10]);
    check(&[9, 1, 2, 2, 0, 7, 7, u64::MAX, 0]);
    // many runs: sorted externally
    let many: Vec<u64> = (0..1000u64).map(|i| (i * 7919) % 101).collect();
    check(&many);
    // past the buffer (a file) and several blocks of the external sort
    let big: Vec<u64> = (0..(SORT_BLOCK as u64 * 2 + 77))
        .map(|i| i / 3 + (i % 5 == 0) as u64 * 7)
        .collect();
    check(&big);
}

#[test]
fn ids_read_back_as_written_whether_ascii_or_not_and_bytes_that_are_not_utf8_are_refused() {
    for id in ["s1", "", "stöörage-é", "张量-7", "a\u{1b}b"] {
        let mut buf = Vec::new();
        encode(&mut buf, &item(0, 5, id), 0, true);
        let mut pos = 0;
        let got = decode(&buf, &mut pos, 0, None).expect("a whole record");
        assert_eq!(got.storage, Some(id));
        assert_eq!(pos, buf.len());
    }
    assert_eq!(id_text(b"abc"), Some("abc"));
    assert_eq!(id_text("é".as_bytes()), Some("é"));
    assert_eq!(id_text(&[b'a', 0xff]), None);
    assert_eq!(id_text(&[0xc3]), None, "a cut multi-byte character");
}

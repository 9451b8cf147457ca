//! The kind lists are generated from the one `trace_events!` table; these tests show that serde
//! (the tags it actually reads and writes), `kind_name`, `EVENT_KINDS`, `EVENT_KIND_SINCE` and
//! `SchemaVersion::allows_kind` agree, so none can drift from another.

use std::collections::BTreeSet;

use trace_wire::{
    DroppedEventsEvent, SchemaVersion, SpanEndEvent, TraceEvent, EVENT_KINDS, EVENT_KIND_SINCE,
    SUPPORTED_SCHEMAS, WRITE_VERSION,
};

/// The variants serde knows, read from its own "unknown variant" message (it lists every tag).
fn serde_tags() -> BTreeSet<String> {
    let err = serde_json::from_str::<TraceEvent>(r#"{"kind":"no_such_kind"}"#)
        .expect_err("an unknown kind is rejected")
        .to_string();
    let list = err
        .split("expected one of ")
        .nth(1)
        .unwrap_or_else(|| panic!("serde's message lists the tags: {err}"));
    let list = list.split(" at line").next().unwrap_or(list);
    list.split(", ")
        .map(|t| t.trim().trim_matches('`').to_string())
        .collect()
}

#[test]
fn event_kinds_are_exactly_the_tags_serde_reads() {
    let listed: BTreeSet<String> = EVENT_KINDS.iter().map(|k| k.to_string()).collect();
    assert_eq!(listed.len(), EVENT_KINDS.len(), "a kind is listed twice");
    assert_eq!(serde_tags(), listed);
}

#[test]
fn every_listed_kind_deserializes_as_itself_and_names_itself() {
    for kind in EVENT_KINDS {
        // A line with only the tag fails on a missing field of that kind's body (or parses, for
        // a body whose fields all have defaults), never on an unknown variant.
        match serde_json::from_str::<TraceEvent>(&format!(r#"{{"kind":"{kind}"}}"#)) {
            Ok(event) => assert_eq!(event.kind_name(), *kind),
            Err(e) => assert!(e.to_string().contains("missing field"), "{kind}: {e}"),
        }
    }
    let written = [
        TraceEvent::SpanEnd(SpanEndEvent {
            id: "s1".into(),
            duration_ns: 1,
            inferred: false,
            inferred_reason: None,
        }),
        TraceEvent::DroppedEvents(DroppedEventsEvent {
            timestamp_ns: 1,
            dropped_events: 2,
        }),
    ];
    for event in written {
        let value = serde_json::to_value(&event).expect("serializes");
        assert_eq!(value["kind"], event.kind_name());
    }
}

#[test]
fn since_table_covers_every_kind_in_order_and_drives_allows_kind() {
    let since_kinds: Vec<&str> = EVENT_KIND_SINCE.iter().map(|(k, _)| *k).collect();
    assert_eq!(since_kinds, EVENT_KINDS);
    for (kind, since) in EVENT_KIND_SINCE {
        assert!(WRITE_VERSION.allows_kind(kind), "{kind} is written");
        assert!(since.allows_kind(kind), "{kind} exists in {since}");
        if let Some(before) = SUPPORTED_SCHEMAS
            .iter()
            .filter_map(|s| SchemaVersion::parse(s))
            .filter(|v| v < since)
            .max()
        {
            assert!(
                !before.allows_kind(kind),
                "{kind} did not exist in {before}"
            );
        }
    }
    // The rules the hand-written match had, spelled out.
    assert!(!SchemaVersion::V9.allows_kind("tensor_stats"));
    assert!(SchemaVersion::V10.allows_kind("tensor_stats"));
    assert!(!SchemaVersion::V10.allows_kind("dropped_events"));
    assert!(!SchemaVersion::V11.allows_kind("sample"));
    assert!(!SchemaVersion::V12.allows_kind("site"));
    assert!(SchemaVersion::V13.allows_kind("alloc_sites"));
    assert!(!SchemaVersion::V6.allows_kind("terminal"));
    assert!(SchemaVersion::V7.allows_kind("device_interval"));
    assert!(SchemaVersion::V6.allows_kind("memory"));
    assert!(
        SchemaVersion::V6.allows_kind("not_a_kind"),
        "unknown kinds are the loader's"
    );
}

#[test]
fn supported_schemas_round_trip_through_the_version_enum() {
    for schema in SUPPORTED_SCHEMAS {
        let v = SchemaVersion::parse(schema).expect("supported");
        assert_eq!(v.as_str(), *schema);
    }
    assert_eq!(SUPPORTED_SCHEMAS[0], WRITE_VERSION.as_str());
    assert_eq!(SchemaVersion::ALL.last(), Some(&WRITE_VERSION));
    let oldest_first: Vec<&str> = SchemaVersion::ALL.iter().map(|v| v.as_str()).collect();
    let mut newest_first = SUPPORTED_SCHEMAS.to_vec();
    newest_first.reverse();
    assert_eq!(oldest_first, newest_first);
    assert!(SchemaVersion::ALL.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(SchemaVersion::parse("candle-graph/trace/5"), None);
}

#[test]
fn unit_enums_name_themselves_as_serde_does() {
    use trace_wire::{ContractField, CoverageLevel, MemoryCategory, Pass, SymbolQuality};
    fn check<T>(all: &[T])
    where
        T: Copy + serde::Serialize + std::str::FromStr + PartialEq + std::fmt::Debug,
        &'static str: From<T>,
    {
        for &v in all {
            let name: &'static str = v.into();
            assert_eq!(serde_json::to_value(v).unwrap(), name);
            assert_eq!(name.parse::<T>().ok(), Some(v));
        }
    }
    check(&ContractField::ALL);
    check(&CoverageLevel::ALL);
    check(&MemoryCategory::ALL);
    check(&Pass::ALL);
    check(&SymbolQuality::ALL);
    assert_eq!(MemoryCategory::ALL.len(), 5);
    for (i, c) in MemoryCategory::ALL.iter().enumerate() {
        assert_eq!(c.index(), i);
    }
    assert_eq!(
        "bogus".parse::<Pass>().unwrap_err().to_string(),
        "unknown Pass `bogus`"
    );
}

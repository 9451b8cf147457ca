//! The worked example of the README's "Adding an event kind": a toy kind, `checkpoint`, added to
//! a table of kinds in this test's own scope with the macro that declares the real one. One row
//! gives the kind its serde tag, `kind_name`, its place in `EVENT_KINDS`, the version it
//! appeared in and its body type for the loader's diagnosis (`visit_body`). The steps past the
//! wire crate (document, builder, producer, analyzer) are the checklist's; the last test counts
//! the files it names.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Step 1: the body of the new kind, with every field documented (units in names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointEvent {
    /// When the checkpoint was written, ns since session start.
    pub timestamp_ns: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Where it was written, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

mod toy {
    use super::CheckpointEvent;
    use trace_wire::{MetaEvent, TerminalEvent};

    // Step 1: one row in the table (here a table of three kinds; the real one is in
    // `trace-wire/src/event.rs`).
    trace_wire::trace_events! {
        /// A toy trace event enum with the `checkpoint` kind.
        #[allow(clippy::large_enum_variant)]
        pub enum TraceEvent {
            /// Schema and run metadata.
            Meta(MetaEvent) = "meta", since V6;
            /// A checkpoint was written (new in this example).
            Checkpoint(CheckpointEvent) = "checkpoint", since V13;
            /// How the capture ended.
            Terminal(TerminalEvent) = "terminal", since V7;
        }
    }
}

use toy::{TraceEvent, EVENT_KINDS, EVENT_KIND_SINCE};
use trace_wire::{BodyVisitor, SchemaVersion};

fn checkpoint() -> TraceEvent {
    TraceEvent::Checkpoint(CheckpointEvent {
        timestamp_ns: 42,
        bytes: 4096,
        path: None,
    })
}

#[test]
fn one_row_gives_the_tag_the_name_and_the_list() {
    let line = serde_json::to_string(&checkpoint()).unwrap();
    assert_eq!(
        line,
        r#"{"kind":"checkpoint","timestamp_ns":42,"bytes":4096}"#
    );
    let back: TraceEvent = serde_json::from_str(&line).unwrap();
    assert_eq!(back, checkpoint());
    assert_eq!(back.kind_name(), "checkpoint");
    assert_eq!(EVENT_KINDS, ["meta", "checkpoint", "terminal"]);
    // serde's own list of tags is the same list.
    let err = serde_json::from_str::<TraceEvent>(r#"{"kind":"nope"}"#)
        .unwrap_err()
        .to_string();
    let tags: BTreeSet<&str> = EVENT_KINDS.iter().copied().collect();
    for tag in tags {
        assert!(err.contains(&format!("`{tag}`")), "{err}");
    }
}

#[test]
fn the_row_says_which_versions_have_the_kind() {
    let since = |kind: &str| {
        EVENT_KIND_SINCE
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, v)| *v)
    };
    assert_eq!(since("checkpoint"), Some(SchemaVersion::V13));
    assert!(since("checkpoint").unwrap() > SchemaVersion::V12);
    assert_eq!(since("bogus"), None);
}

#[test]
fn the_loader_finds_the_body_type_by_kind() {
    struct TypeName;
    impl BodyVisitor for TypeName {
        type Output = &'static str;
        fn visit<T: serde::de::DeserializeOwned>(self, _kind: &'static str) -> &'static str {
            std::any::type_name::<T>()
        }
    }
    let name = TraceEvent::visit_body("checkpoint", TypeName).unwrap();
    assert!(name.ends_with("CheckpointEvent"), "{name}");
    assert_eq!(TraceEvent::visit_body("nope", TypeName), None);
}

/// The checklist in the README: each numbered step is one file edited by hand; there are at
/// most 8, and every path a step names exists.
#[test]
fn the_checklist_has_at_most_eight_steps_naming_existing_files() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("crates/trace-wire/README.md")).unwrap();
    let section = readme
        .split("## Adding an event kind")
        .nth(1)
        .expect("the README has the checklist")
        .split("\n## ")
        .next()
        .unwrap();
    let mut steps = 0;
    let mut paths = BTreeSet::new();
    let mut in_step = false;
    for line in section.lines() {
        let numbered = line
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if numbered {
            steps += 1;
            in_step = true;
        } else if !line.starts_with("   ") {
            in_step = false;
        }
        if in_step {
            for (i, part) in line.split('`').enumerate() {
                if i % 2 == 1 && part.starts_with("crates/") {
                    paths.insert(part.to_string());
                }
            }
        }
    }
    assert!(
        (1..=8).contains(&steps),
        "the README's checklist has {steps} steps"
    );
    assert!(paths.len() >= 6, "{paths:?}");
    for p in &paths {
        assert!(root.join(p).exists(), "{p} does not exist");
    }
}

//! [`StreamGate`]: the stream-shape rules every reader of this crate enforces, line by line:
//! `meta` first and once, a supported `schema`, nothing after `terminal`. The sequential
//! [`crate::TraceReader`] and the parallel loader ([`crate::load`]) both call
//! [`StreamGate::check`], so they accept and refuse the same streams with the same errors.

use crate::error::LoadError;
use crate::event::{MetaEvent, TraceEvent};
use crate::version::SchemaVersion;

/// The state of the stream-shape rules (see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct StreamGate {
    version: Option<SchemaVersion>,
    /// 1-based line of the `meta` event (0: none yet).
    meta_line: u64,
    /// 1-based line of the `terminal` event (0: none yet).
    terminal_line: u64,
}

impl StreamGate {
    /// The schema version, once the meta line passed the gate.
    pub(crate) fn version(&self) -> Option<SchemaVersion> {
        self.version
    }

    /// Checks the event of `kind` on 1-based `line` (`meta`: its body, when it is the meta
    /// event) against the rules and records it.
    ///
    /// # Errors
    /// [`LoadError::EventAfterTerminal`], [`LoadError::DuplicateMeta`],
    /// [`LoadError::UnsupportedSchema`] (empty detail), [`LoadError::MissingMeta`].
    pub(crate) fn check(
        &mut self,
        kind: &str,
        meta: Option<&MetaEvent>,
        line: u64,
    ) -> Result<(), LoadError> {
        if self.terminal_line != 0 {
            return Err(LoadError::EventAfterTerminal {
                line,
                kind: kind.to_string(),
                terminal_line: self.terminal_line,
            });
        }
        if let Some(meta) = meta {
            if self.version.is_some() {
                return Err(LoadError::DuplicateMeta {
                    line,
                    first_line: self.meta_line,
                });
            }
            let Some(version) = SchemaVersion::parse(&meta.schema) else {
                return Err(LoadError::UnsupportedSchema {
                    line,
                    schema: meta.schema.clone(),
                    detail: String::new(),
                });
            };
            self.version = Some(version);
            self.meta_line = line;
        } else if self.version.is_none() {
            return Err(LoadError::MissingMeta {
                line,
                found: format!("a `{kind}` event"),
            });
        } else if kind == "terminal" {
            self.terminal_line = line;
        }
        Ok(())
    }

    /// [`Self::check`] for a whole event.
    ///
    /// # Errors
    /// As [`Self::check`].
    pub(crate) fn check_event(&mut self, event: &TraceEvent, line: u64) -> Result<(), LoadError> {
        let meta = match event {
            TraceEvent::Meta(m) => Some(m),
            _ => None,
        };
        self.check(event.kind_name(), meta, line)
    }
}

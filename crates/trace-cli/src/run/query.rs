//! `query`: JSON slices for scripts (always JSON, streamed as it is made).

use anyhow::Result;
use trace_views::envelope::{self, InputRecord};
use trace_views::load::Detail;
use trace_views::query::{self, Filter};
use trace_views::slice::Slice;

use crate::cli::QueryArgs;
use crate::input::{load, InputRecordOf as _};
use crate::output::Output;

/// Runs `query`.
///
/// # Errors
/// Reading the trace; a query the trace cannot answer.
pub fn run(args: QueryArgs) -> Result<Output> {
    let (trace, analysis) = load(&args.trace, Detail::Full)?;
    let filter = match (args.label, args.label_prefix) {
        (Some(l), _) => Some(Filter::Label(l)),
        (None, Some(p)) => Some(Filter::LabelPrefix(p)),
        (None, None) => None,
    };
    let slice = Slice {
        limit: args.limit,
        fields: args.fields,
    };
    let report = query::run(&trace.doc, analysis, args.kind, filter, slice)?;
    let input = InputRecord::of(trace);
    Ok(Output::stream(move |w| {
        envelope::write_json(w, "query", Some(input), &report)
    }))
}

//! The page model of the HTML report: sections of blocks (facts, lists, sortable tables,
//! findings, preformatted text, chart placeholders) and the chart data. Callers compose a
//! [`Page`] from their own reports — the CLI from the same records `summary`, `memory` and
//! `check` print, so the page says what they say — and [`crate::html::render`] turns it into
//! one self-contained file. A new view (e.g. a diff of two runs) is one more [`Section`].
//!
//! Every string in the model is plain text: the renderer escapes it for HTML, and text taken
//! from a trace is passed through [`trace_format::escape`] by [`Text::trace`] (control and
//! bidirectional characters shown visibly, as in the terminal).

use serde::Serialize;

use crate::FindingText;

/// Text for the page. [`Text::trace`] marks text that comes from a trace (escaped like the
/// terminal output); [`Text::from`] is text the tool wrote.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(transparent)]
pub struct Text(pub String);

impl Text {
    /// Text from a trace: control and bidirectional characters made visible.
    pub fn trace(s: &str) -> Self {
        Self(trace_format::escape(s).into_owned())
    }
}

impl From<String> for Text {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Self(s.to_string())
    }
}

/// The whole page.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// `<title>` and heading.
    pub title: Text,
    /// One line under the heading (run identity).
    pub subtitle: Text,
    /// Sections in order; each gets an entry in the navigation.
    pub sections: Vec<Section>,
    /// Data the charts draw from (see [`crate::data::ChartData`]), embedded as JSON.
    pub data: serde_json::Value,
}

/// A section with a heading.
#[derive(Debug, Clone, Default)]
pub struct Section {
    /// Anchor id (ASCII letters, digits and `-`).
    pub id: String,
    /// Heading.
    pub title: Text,
    /// Content in order.
    pub blocks: Vec<Block>,
}

/// One piece of a section.
#[derive(Debug, Clone)]
pub enum Block {
    /// A sub-heading.
    Heading(Text),
    /// Label/value lines (`health  valid, complete`); a value may be marked for tests.
    Facts(Vec<Fact>),
    /// A paragraph.
    Paragraph(Text),
    /// A bulleted list.
    List(Vec<Text>),
    /// A sortable table.
    Table(Table),
    /// Findings with severity, summary and advice; their text is shown through
    /// [`trace_format::escape`] (summaries quote span names and labels).
    Findings(Vec<FindingText>),
    /// Preformatted text (a command's output as the terminal shows it), collapsed.
    Pre {
        /// Summary line of the collapsed block.
        summary: Text,
        /// The text.
        text: Text,
    },
    /// A table of rows collapsed under a summary line that counts them (`<details>`, closed):
    /// grouped tables come first and the rows one by one on request (a click, Enter or Space on
    /// the summary). Rendered as `details.rows` with the id `{table.id}-rows`.
    Collapsed {
        /// The summary line (what the rows are, counted).
        summary: Text,
        /// The rows.
        table: Table,
    },
    /// Series of bytes over time overlaid on one chart, drawn server-side as an inline SVG (no
    /// script): the diff page's baseline and candidate memory timelines.
    Overlay(Overlay),
    /// Figures by captured step (a run's series), one line per series with a marker per
    /// capture, drawn server-side as an inline SVG; zoomable (wheel, drag, +/−, Escape).
    StepChart(StepChart),
    /// The memory chart of one device (index into the chart data's `devices`).
    MemoryChart {
        /// Index into `devices`.
        device: usize,
    },
    /// The icicle of what held a device's peak by allocating span path.
    HeldIcicle {
        /// Index into `devices`.
        device: usize,
    },
    /// The icicle of the span tree over time, with lanes.
    SpanIcicle,
    /// The panel showing the live set of a clicked time.
    LiveSetPanel,
    /// The flame graph (icicle) of the sampled call stacks, one tree per pass, drawn from the
    /// chart data's `flame` (see [`crate::flame`]): zoomable by click or Enter, reset by Escape
    /// or its button.
    FlameGraph,
}

/// A label/value line.
#[derive(Debug, Clone, Default)]
pub struct Fact {
    /// Label.
    pub label: Text,
    /// Value.
    pub value: Text,
    /// `data-*` attributes on the value, for tests and scripts (name without `data-`, value).
    pub data: Vec<(String, String)>,
    /// Sub-items under the value.
    pub items: Vec<Text>,
}

/// A sortable table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Element id.
    pub id: String,
    /// Caption.
    pub caption: Text,
    /// Columns.
    pub columns: Vec<Column>,
    /// Rows of cells, one per column.
    pub rows: Vec<Vec<Cell>>,
    /// A line under the table (e.g. what the rows left out, counted).
    pub footer: Option<Text>,
}

/// Series of live bytes over time on one chart (see [`Block::Overlay`]).
#[derive(Debug, Clone)]
pub struct Overlay {
    /// Element id.
    pub id: String,
    /// Caption (what is drawn, and from where time counts).
    pub caption: Text,
    /// The series, drawn in order (the first solid, the others dashed).
    pub series: Vec<OverlaySeries>,
}

/// The unit of a [`StepChart`]'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepUnit {
    /// Bytes.
    Bytes,
    /// Nanoseconds.
    Nanoseconds,
    /// Parts per million of a whole (a share: 1,000,000 is 100%).
    PartsPerMillion,
}

/// Figures by captured step (see [`Block::StepChart`]).
#[derive(Debug, Clone)]
pub struct StepChart {
    /// Element id.
    pub id: String,
    /// Caption (what is drawn).
    pub caption: Text,
    /// The unit of every series.
    pub unit: StepUnit,
    /// The series, drawn in order.
    pub series: Vec<StepSeries>,
}

/// One series of a [`StepChart`].
#[derive(Debug, Clone)]
pub struct StepSeries {
    /// Legend name.
    pub name: Text,
    /// `(step, value)` by step.
    pub points: Vec<(u64, u64)>,
}

/// One series of an [`Overlay`].
#[derive(Debug, Clone)]
pub struct OverlaySeries {
    /// Legend name.
    pub name: Text,
    /// `(time in ns, bytes)` in time order; each value holds until the next point.
    pub points: Vec<(i64, u64)>,
}

/// A column.
#[derive(Debug, Clone)]
pub struct Column {
    /// Header.
    pub title: Text,
    /// Right-aligned, sorted by number.
    pub numeric: bool,
}

impl Column {
    /// A text column.
    pub fn text(title: &str) -> Self {
        Self {
            title: title.into(),
            numeric: false,
        }
    }

    /// A numeric column.
    pub fn number(title: &str) -> Self {
        Self {
            title: title.into(),
            numeric: true,
        }
    }
}

/// A cell: its text and what it sorts by.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    /// Shown text.
    pub text: Text,
    /// Sort key of a numeric column (`None`: unknown, sorts last).
    pub sort: Option<f64>,
}

impl Cell {
    /// Text sorted as text.
    pub fn text(t: impl Into<Text>) -> Self {
        Self {
            text: t.into(),
            sort: None,
        }
    }

    /// Text from a trace.
    pub fn trace(s: &str) -> Self {
        Self::text(Text::trace(s))
    }

    /// A figure shown as `text`, sorted by `value`.
    pub fn number(text: impl Into<Text>, value: Option<f64>) -> Self {
        Self {
            text: text.into(),
            sort: value,
        }
    }
}

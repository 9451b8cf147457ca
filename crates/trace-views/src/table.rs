//! Aligned plain-text tables, rendered by `comfy-table` (which measures display width, so wide
//! CJK characters keep columns aligned): a header row, left- or right-aligned columns, two
//! spaces between columns, no borders, no trailing spaces. Cells holding trace text go in
//! through [`Table::text`] (escaped and elided to [`MAX_TEXT`] columns with `…`; the full text
//! stays in `--json`).

use comfy_table::presets::NOTHING;
use comfy_table::{CellAlignment, ContentArrangement, TableComponent};

/// Widest a cell of trace text may be, in display columns.
pub const MAX_TEXT: usize = 48;

/// Alignment of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text columns.
    Left,
    /// Numeric columns.
    Right,
}

/// A table under construction.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<String>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these `(header, alignment)` columns.
    pub fn new(columns: &[(&str, Align)]) -> Self {
        Self {
            headers: columns.iter().map(|(h, _)| h.to_string()).collect(),
            aligns: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    /// A cell of text from the trace: escaped for the terminal and elided to [`MAX_TEXT`].
    pub fn text(s: &str) -> String {
        trace_format::cell(s, MAX_TEXT)
    }

    /// A span path from the trace: escaped and elided to [`MAX_TEXT`] in the middle, so the
    /// module at its end stays readable.
    pub fn path(s: &str) -> String {
        trace_format::path_cell(s, MAX_TEXT)
    }

    /// Appends a row; missing cells are blank, extra cells are ignored. Cells are written as
    /// given: pass trace text through [`Table::text`].
    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut row: Vec<String> = cells.into_iter().map(Into::into).collect();
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    /// Renders every line prefixed by `indent`, each ending in `\n`.
    pub fn render(&self, indent: &str) -> String {
        let mut t = comfy_table::Table::new();
        t.load_preset(NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled);
        for c in [
            TableComponent::LeftBorder,
            TableComponent::RightBorder,
            TableComponent::TopBorder,
            TableComponent::BottomBorder,
            TableComponent::HeaderLines,
            TableComponent::LeftHeaderIntersection,
            TableComponent::RightHeaderIntersection,
            TableComponent::MiddleHeaderIntersections,
            TableComponent::HorizontalLines,
        ] {
            t.remove_style(c);
        }
        t.set_header(self.headers.clone());
        for row in &self.rows {
            t.add_row(row.clone());
        }
        let last = self.aligns.len().saturating_sub(1);
        for (i, column) in t.column_iter_mut().enumerate() {
            // no drawn separator: a right padding of two spaces between columns
            column.set_padding((0, if i < last { 2 } else { 0 }));
            column.set_cell_alignment(match self.aligns[i] {
                Align::Left => CellAlignment::Left,
                Align::Right => CellAlignment::Right,
            });
        }
        let mut out = String::new();
        for line in t.lines() {
            out.push_str(indent);
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(&[("NAME", Align::Left), ("BYTES", Align::Right)]);
        t.row(["a", "1.00 KiB"]);
        t.row(["longer µ", "5 B"]);
        assert_eq!(
            t.render("  "),
            "  NAME         BYTES\n  a         1.00 KiB\n  longer µ       5 B\n"
        );
    }

    #[test]
    fn wide_characters_keep_columns_aligned_and_text_is_escaped_and_elided() {
        let mut t = Table::new(&[("NAME", Align::Left), ("N", Align::Right)]);
        t.row([Table::text("数据"), "1".into()]);
        t.row([Table::text("a\u{1b}[2J"), "22".into()]);
        t.row([Table::text(&"x".repeat(60)), "3".into()]);
        let out = t.render("");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1], format!("数据{}   1", " ".repeat(MAX_TEXT - 4)));
        assert_eq!(
            lines[2],
            format!("a\\x1b[2J{}  22", " ".repeat(MAX_TEXT - 8))
        );
        assert_eq!(lines[3], format!("{}…   3", "x".repeat(MAX_TEXT - 1)));
        assert!(!out.contains('\u{1b}'));
    }
}

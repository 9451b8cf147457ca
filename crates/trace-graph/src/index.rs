//! The span hierarchy resolved once into index vectors: parents, children, ops per span,
//! op ordinals and a canonical pre-order. Built in O(n log n) (children sorted by start time)
//! and shared by health, timing and the graph so nothing walks the document twice.

use std::cmp::Ordering;

use trace_schema::TraceDocument;

/// Sentinel for "no index".
pub(crate) const NONE: u32 = u32::MAX;

/// Resolved hierarchy of one document.
#[derive(Debug, Clone)]
pub(crate) struct TraceIndex {
    /// Parent span index per span (`NONE` for roots and unknown parents).
    pub parent: Vec<u32>,
    /// Span names a parent id that is not a span.
    pub parent_unknown: Vec<bool>,
    /// Child spans per span, sorted by `(start_ns, id)`.
    pub children: Vec<Vec<u32>>,
    /// Op indices per span, in file order.
    pub ops_by_span: Vec<Vec<u32>>,
    /// Span index of each op (`NONE` when its span is unknown).
    pub op_span: Vec<u32>,
    /// 0-based position of each op among its span's ops (node id `{span}/op/{n}`).
    pub op_ordinal: Vec<u32>,
    /// Spans reachable from a root in canonical depth-first pre-order (children by start time).
    pub preorder: Vec<u32>,
    /// Spans not reachable from any root: they sit on or below a parent cycle.
    pub in_cycle: Vec<bool>,
}

impl TraceIndex {
    /// Resolves the hierarchy of `doc`.
    pub fn build(doc: &TraceDocument) -> Self {
        let n = doc.spans.len();
        let mut parent = vec![NONE; n];
        let mut parent_unknown = vec![false; n];
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut roots = Vec::new();
        for (i, span) in doc.spans.iter().enumerate() {
            match span.parent {
                None => roots.push(i as u32),
                Some(p) => match doc.span_index(p) {
                    Some(pi) => {
                        parent[i] = pi as u32;
                        children[pi].push(i as u32);
                    }
                    None => {
                        parent_unknown[i] = true;
                        roots.push(i as u32);
                    }
                },
            }
        }
        let order = |a: &u32, b: &u32| -> Ordering {
            let (sa, sb) = (&doc.spans[*a as usize], &doc.spans[*b as usize]);
            sa.start_ns
                .cmp(&sb.start_ns)
                .then_with(|| natural_cmp(doc.str(sa.id), doc.str(sb.id)))
        };
        for list in &mut children {
            list.sort_by(order);
        }
        roots.sort_by(order);

        let mut ops_by_span: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut op_span = vec![NONE; doc.ops.len()];
        let mut op_ordinal = vec![0u32; doc.ops.len()];
        let mut foreign_ordinals: std::collections::HashMap<trace_schema::Sym, u32> =
            std::collections::HashMap::new();
        for (i, op) in doc.ops.iter().enumerate() {
            match doc.span_index(op.span) {
                Some(si) => {
                    op_ordinal[i] = ops_by_span[si].len() as u32;
                    ops_by_span[si].push(i as u32);
                    op_span[i] = si as u32;
                }
                None => {
                    let next = foreign_ordinals.entry(op.span).or_insert(0);
                    op_ordinal[i] = *next;
                    *next += 1;
                }
            }
        }

        let mut preorder = Vec::with_capacity(n);
        let mut visited = vec![false; n];
        let mut stack: Vec<u32> = roots.iter().rev().copied().collect();
        while let Some(s) = stack.pop() {
            if std::mem::replace(&mut visited[s as usize], true) {
                continue;
            }
            preorder.push(s);
            stack.extend(children[s as usize].iter().rev().copied());
        }
        let in_cycle = visited.iter().map(|v| !v).collect();
        Self {
            parent,
            parent_unknown,
            children,
            ops_by_span,
            op_span,
            op_ordinal,
            preorder,
            in_cycle,
        }
    }

    /// Node id of op `i`: `{span}/op/{n}`.
    pub fn op_node_id(&self, doc: &TraceDocument, i: usize) -> String {
        format!("{}/op/{}", doc.str(doc.ops[i].span), self.op_ordinal[i])
    }
}

/// End of a span whose duration was recorded: `None` while open and for a duration of 0,
/// which old traces wrote for "not recorded".
pub(crate) fn recorded_end(span: &trace_schema::SpanRecord) -> Option<u64> {
    span.duration_ns
        .filter(|&d| d > 0)
        .map(|d| span.start_ns.saturating_add(d))
}

/// Compares strings with embedded numbers by value (`s2` < `s10`), so probe ids sort in
/// creation order; ties fall back to plain byte order.
pub(crate) fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    while !x.is_empty() && !y.is_empty() {
        if x[0].is_ascii_digit() && y[0].is_ascii_digit() {
            let nx = x.iter().take_while(|c| c.is_ascii_digit()).count();
            let ny = y.iter().take_while(|c| c.is_ascii_digit()).count();
            let (dx, dy) = (trim_zeros(&x[..nx]), trim_zeros(&y[..ny]));
            let ord = dx.len().cmp(&dy.len()).then_with(|| dx.cmp(dy));
            if ord != Ordering::Equal {
                return ord;
            }
            x = &x[nx..];
            y = &y[ny..];
        } else {
            if x[0] != y[0] {
                return x[0].cmp(&y[0]);
            }
            x = &x[1..];
            y = &y[1..];
        }
    }
    x.len().cmp(&y.len()).then_with(|| a.cmp(b))
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let z = d.iter().take_while(|&&c| c == b'0').count();
    &d[z..]
}

#[cfg(test)]
mod tests {
    use super::natural_cmp;
    use std::cmp::Ordering;

    #[test]
    fn natural_order_compares_numbers_by_value() {
        assert_eq!(natural_cmp("s2", "s10"), Ordering::Less);
        assert_eq!(natural_cmp("s10", "s10"), Ordering::Equal);
        assert_eq!(natural_cmp("a", "b"), Ordering::Less);
        assert_eq!(natural_cmp("s1/op/3", "s1/op/12"), Ordering::Less);
        assert_eq!(natural_cmp("s01", "s1"), Ordering::Less);
    }
}

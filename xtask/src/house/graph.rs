//! Circles in a directed graph: its strongly connected components of more than one node
//! (Tarjan's algorithm, iterative so that a deep graph cannot overflow the stack).

/// The components of two or more nodes of the graph `edges[node] = successors`, each sorted,
/// in the order of their smallest node.
pub fn circles(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0usize;
    let mut out = Vec::new();
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, position in its successor list)
        let mut work = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut pos)) = work.last_mut() {
            if let Some(&w) = edges[v].get(*pos) {
                *pos += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort_unstable();
                    out.push(component);
                }
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::circles;

    #[test]
    fn a_chain_has_no_circle_and_a_loop_is_one() {
        assert!(circles(&[vec![1], vec![2], vec![]]).is_empty());
        assert_eq!(
            circles(&[vec![1], vec![2], vec![0], vec![0]]),
            vec![vec![0, 1, 2]]
        );
    }

    #[test]
    fn two_separate_circles_are_two() {
        let g = vec![vec![1], vec![0], vec![3], vec![2, 4], vec![]];
        assert_eq!(circles(&g), vec![vec![0, 1], vec![2, 3]]);
    }

    #[test]
    fn a_long_chain_does_not_overflow() {
        let n = 200_000;
        let mut g: Vec<Vec<usize>> = (0..n).map(|i| vec![i + 1]).collect();
        g[n - 1] = vec![0];
        assert_eq!(circles(&g)[0].len(), n);
    }
}

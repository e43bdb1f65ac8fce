//! Cycle search over the transaction dependency graph, as Elle does it: Tarjan's strongly
//! connected components per edge-type subgraph, then, per component, one shortest cycle of
//! the shape each class needs (found by breadth-first search back along allowed edges).
//!
//! Edges come sorted and adjacency lists keep that order, so the cycles found, and the order
//! they are reported in, depend only on the graph.

use crate::txn_report::Dep;

/// A dependency edge between two graph nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Edge {
    pub from: u32,
    pub to: u32,
    pub dep: Dep,
}

/// Cycles per class, each as edge indexes in order; one per component at most.
#[derive(Default)]
pub(crate) struct Cycles {
    pub g0: Vec<Vec<usize>>,
    pub g1c: Vec<Vec<usize>>,
    pub g_single: Vec<Vec<usize>>,
    pub g2: Vec<Vec<usize>>,
}

/// How many breadth-first searches one component may cost per class: a huge component of a
/// history full of cycles is reported by its first cycles, not searched exhaustively.
const SEARCHES_PER_COMPONENT: usize = 64;

const NONE: u32 = u32::MAX;

struct Graph<'e> {
    edges: &'e [Edge],
    /// Outgoing edge indexes per node, in edge order.
    out: Vec<Vec<u32>>,
    /// Breadth-first search state, reused: visit stamp and the edge that reached a node.
    stamp: Vec<u32>,
    via: Vec<u32>,
    round: u32,
}

/// Finds the cycles of `edges` (sorted, no self-loops) over `nodes` nodes.
pub(crate) fn find(nodes: usize, edges: &[Edge]) -> Cycles {
    let mut g = Graph::new(nodes, edges);
    let ww = |d: Dep| d == Dep::Ww;
    let ww_wr = |d: Dep| d != Dep::Rw;
    let any = |_: Dep| true;
    let comp_ww = g.components(ww);
    let comp_wwwr = g.components(ww_wr);
    let comp_all = g.components(any);
    let mut out = Cycles {
        g0: g.close(&comp_ww, Dep::Ww, ww),
        g1c: g.close(&comp_wwwr, Dep::Wr, ww_wr),
        ..Cycles::default()
    };
    // An anti-dependency u -> v closes a G-single cycle if v reaches u without one; else
    // every cycle through it has two or more (G2).
    let mut budget: Vec<usize> = vec![SEARCHES_PER_COMPONENT; nodes];
    let (mut single_done, mut g2_done) = (vec![false; nodes], vec![false; nodes]);
    for (i, e) in edges.iter().enumerate() {
        let c = comp_all[e.from as usize] as usize;
        if e.dep != Dep::Rw || comp_all[e.to as usize] as usize != c {
            continue;
        }
        if (single_done[c] && g2_done[c]) || budget[c] == 0 {
            continue;
        }
        budget[c] -= 1;
        match g.path(e.to, e.from, &comp_all, ww_wr) {
            Some(path) if !single_done[c] => {
                single_done[c] = true;
                out.g_single.push(cycle(i, path));
            }
            Some(_) => {}
            None if !g2_done[c] => {
                g2_done[c] = true;
                if let Some(path) = g.path(e.to, e.from, &comp_all, any) {
                    out.g2.push(cycle(i, path));
                }
            }
            None => {}
        }
    }
    out
}

fn cycle(first: usize, mut rest: Vec<usize>) -> Vec<usize> {
    rest.insert(0, first);
    rest
}

impl<'e> Graph<'e> {
    fn new(nodes: usize, edges: &'e [Edge]) -> Self {
        let mut out = vec![Vec::new(); nodes];
        for (i, e) in edges.iter().enumerate() {
            out[e.from as usize].push(i as u32);
        }
        Self {
            edges,
            out,
            stamp: vec![0; nodes],
            via: vec![NONE; nodes],
            round: 0,
        }
    }

    /// One cycle per component of `comp` that holds an edge of type `first` inside it:
    /// that edge, then the shortest way back along `allowed` edges.
    fn close(
        &mut self,
        comp: &[u32],
        first: Dep,
        allowed: impl Fn(Dep) -> bool + Copy,
    ) -> Vec<Vec<usize>> {
        let mut done = vec![false; comp.len()];
        let mut found = Vec::new();
        for (i, e) in self.edges.iter().enumerate() {
            let c = comp[e.from as usize];
            if e.dep != first || comp[e.to as usize] != c {
                continue;
            }
            if std::mem::replace(&mut done[c as usize], true) {
                continue;
            }
            if let Some(path) = self.path(e.to, e.from, comp, allowed) {
                found.push(cycle(i, path));
            }
        }
        found
    }

    /// Shortest path (edge indexes) from `from` to `to` along `allowed` edges, staying in
    /// `from`'s component of `comp`.
    fn path(
        &mut self,
        from: u32,
        to: u32,
        comp: &[u32],
        allowed: impl Fn(Dep) -> bool,
    ) -> Option<Vec<usize>> {
        self.round += 1;
        let round = self.round;
        let c = comp[from as usize];
        let mut queue = std::collections::VecDeque::from([from]);
        self.stamp[from as usize] = round;
        while let Some(n) = queue.pop_front() {
            if n == to {
                let mut path = Vec::new();
                let mut at = to;
                while at != from {
                    let e = self.via[at as usize] as usize;
                    path.push(e);
                    at = self.edges[e].from;
                }
                path.reverse();
                return Some(path);
            }
            for &e in &self.out[n as usize] {
                let edge = self.edges[e as usize];
                let next = edge.to as usize;
                if allowed(edge.dep) && comp[next] == c && self.stamp[next] != round {
                    self.stamp[next] = round;
                    self.via[next] = e;
                    queue.push_back(edge.to);
                }
            }
        }
        None
    }

    /// Tarjan's strongly connected components over the `allowed` edges, iteratively (a
    /// long chain of transactions must not overflow the stack): a component id per node.
    fn components(&self, allowed: impl Fn(Dep) -> bool) -> Vec<u32> {
        let n = self.out.len();
        let mut index = vec![NONE; n];
        let mut low = vec![0u32; n];
        let mut comp = vec![NONE; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<u32> = Vec::new();
        // (node, position in its out list)
        let mut work: Vec<(u32, usize)> = Vec::new();
        let (mut next_index, mut next_comp) = (0u32, 0u32);
        for root in 0..n as u32 {
            if index[root as usize] != NONE {
                continue;
            }
            work.push((root, 0));
            while let Some(&mut (v, ref mut pos)) = work.last_mut() {
                let vi = v as usize;
                if *pos == 0 && index[vi] == NONE {
                    index[vi] = next_index;
                    low[vi] = next_index;
                    next_index += 1;
                    stack.push(v);
                    on_stack[vi] = true;
                }
                if let Some(&e) = self.out[vi].get(*pos) {
                    *pos += 1;
                    let edge = self.edges[e as usize];
                    let w = edge.to as usize;
                    if !allowed(edge.dep) {
                        continue;
                    }
                    if index[w] == NONE {
                        work.push((edge.to, 0));
                    } else if on_stack[w] {
                        low[vi] = low[vi].min(index[w]);
                    }
                    continue;
                }
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent as usize] = low[parent as usize].min(low[vi]);
                }
                if low[vi] == index[vi] {
                    while let Some(w) = stack.pop() {
                        on_stack[w as usize] = false;
                        comp[w as usize] = next_comp;
                        if w == v {
                            break;
                        }
                    }
                    next_comp += 1;
                }
            }
        }
        comp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(from: u32, to: u32, dep: Dep) -> Edge {
        Edge { from, to, dep }
    }

    #[test]
    fn classes_by_edge_types() {
        // 0 -ww-> 1 -ww-> 0: G0. 2 -wr-> 3 -ww-> 2: G1c. 4 -rw-> 5 -wr-> 4: G-single.
        // 6 -rw-> 7 -rw-> 6: G2.
        let mut edges = vec![
            e(0, 1, Dep::Ww),
            e(1, 0, Dep::Ww),
            e(2, 3, Dep::Wr),
            e(3, 2, Dep::Ww),
            e(4, 5, Dep::Rw),
            e(5, 4, Dep::Wr),
            e(6, 7, Dep::Rw),
            e(7, 6, Dep::Rw),
            e(8, 9, Dep::Ww),
        ];
        edges.sort();
        let c = find(10, &edges);
        let shape = |cs: &[Vec<usize>]| -> Vec<Vec<(u32, u32)>> {
            cs.iter()
                .map(|cy| cy.iter().map(|&i| (edges[i].from, edges[i].to)).collect())
                .collect()
        };
        assert_eq!(shape(&c.g0), vec![vec![(0, 1), (1, 0)]]);
        assert_eq!(shape(&c.g1c), vec![vec![(2, 3), (3, 2)]]);
        assert_eq!(shape(&c.g_single), vec![vec![(4, 5), (5, 4)]]);
        assert_eq!(shape(&c.g2), vec![vec![(6, 7), (7, 6)]]);
    }

    #[test]
    fn shortest_cycle_in_a_component() {
        // A long ww loop 0->1->2->3->0 with a shortcut 2->0: the cycle through 0->1 is
        // 0->1->2->0.
        let mut edges = vec![
            e(0, 1, Dep::Ww),
            e(1, 2, Dep::Ww),
            e(2, 3, Dep::Ww),
            e(3, 0, Dep::Ww),
            e(2, 0, Dep::Ww),
        ];
        edges.sort();
        let c = find(4, &edges);
        assert_eq!(c.g0.len(), 1);
        let nodes: Vec<u32> = c.g0[0].iter().map(|&i| edges[i].from).collect();
        assert_eq!(nodes, vec![0, 1, 2]);
        assert!(c.g1c.is_empty() && c.g_single.is_empty() && c.g2.is_empty());
    }
}

//! Where each node is drawn. Each connected part starts as a disc around its
//! best-connected node (a switch, a tree's root), its nodes in breadth-first order on a
//! sunflower spiral, which already reads well for the stars, trees and lines fleets are
//! made of; then a force-directed pass (Fruchterman and Reingold: linked nodes attract,
//! all nodes repel) untangles what the spiral cannot show (rings, meshes, cross links). Repulsion is counted only between nodes in neighbouring
//! cells of a grid, so a step costs O(nodes + links). Deterministic: the same graph, the
//! same picture.

/// The ideal distance between two linked nodes, in drawing units.
pub const SPACING: f32 = 40.0;

/// A position for each of `n` nodes joined by `edges` (pairs of indexes).
pub fn layout(n: usize, edges: &[(usize, usize)]) -> Vec<(f32, f32)> {
    if n == 0 {
        return Vec::new();
    }
    let k = SPACING;
    let mut pos = radial(n, edges);
    let (lo, hi) = bounds(&pos);
    let steps = match n {
        0..=500 => 300,
        501..=5000 => 120,
        _ => 60,
    };
    let center = ((lo.0 + hi.0) / 2.0, (lo.1 + hi.1) / 2.0);
    for step in 0..steps {
        // Gentle: the radial start is kept, only untangled and evened out.
        let heat = 2.0 * k * (1.0 - step as f32 / steps as f32) + 0.5;
        let mut push = repulsion(&pos, k);
        for &(a, b) in edges {
            let (dx, dy) = (pos[a].0 - pos[b].0, pos[a].1 - pos[b].1);
            let d = (dx * dx + dy * dy).sqrt().max(0.01);
            let f = d / k;
            push[a].0 -= dx * f;
            push[a].1 -= dy * f;
            push[b].0 += dx * f;
            push[b].1 += dy * f;
        }
        for (p, (fx, fy)) in pos.iter_mut().zip(push) {
            // A weak pull to the middle keeps parts that are not linked together close.
            let (gx, gy) = ((center.0 - p.0) * 0.002, (center.1 - p.1) * 0.002);
            let (fx, fy) = (fx + gx, fy + gy);
            let len = (fx * fx + fy * fy).sqrt().max(0.01);
            let moved = len.min(heat);
            p.0 += fx / len * moved;
            p.1 += fy / len * moved;
        }
    }
    pos
}

/// The smallest and largest x and y.
fn bounds(pos: &[(f32, f32)]) -> ((f32, f32), (f32, f32)) {
    let lo = pos
        .iter()
        .fold((f32::MAX, f32::MAX), |a, p| (a.0.min(p.0), a.1.min(p.1)));
    let hi = pos
        .iter()
        .fold((f32::MIN, f32::MIN), |a, p| (a.0.max(p.0), a.1.max(p.1)));
    (lo, hi)
}

/// Each connected part as a disc around its node of most links (see [`tree`]), the parts
/// side by side in rows, biggest first.
fn radial(n: usize, edges: &[(usize, usize)]) -> Vec<(f32, f32)> {
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges {
        adj[a].push(b);
        adj[b].push(a);
    }
    let mut part = vec![usize::MAX; n];
    let mut parts: Vec<Vec<usize>> = Vec::new();
    for start in 0..n {
        if part[start] != usize::MAX {
            continue;
        }
        let mut members = vec![start];
        part[start] = parts.len();
        let mut i = 0;
        while i < members.len() {
            for &m in &adj[members[i]] {
                if part[m] == usize::MAX {
                    part[m] = parts.len();
                    members.push(m);
                }
            }
            i += 1;
        }
        parts.push(members);
    }
    parts.sort_by_key(|p| std::cmp::Reverse(p.len()));
    let mut pos = vec![(0.0, 0.0); n];
    let (mut x, mut y, mut row_height) = (0.0f32, 0.0f32, 0.0f32);
    let row_width = SPACING * 4.0 * (n as f32).sqrt();
    for members in &parts {
        let root = *members
            .iter()
            .max_by_key(|&&m| (adj[m].len(), std::cmp::Reverse(m)))
            .expect("a part has a node");
        let placed = tree(root, &adj, n);
        let (lo, hi) = bounds(&members.iter().map(|&m| placed[m]).collect::<Vec<_>>());
        if x > 0.0 && x + (hi.0 - lo.0) > row_width {
            (x, y, row_height) = (0.0, y + row_height + SPACING * 2.0, 0.0);
        }
        for &m in members {
            pos[m] = (placed[m].0 - lo.0 + x, placed[m].1 - lo.1 + y);
        }
        x += hi.0 - lo.0 + SPACING * 2.0;
        row_height = row_height.max(hi.1 - lo.1);
    }
    pos
}

/// The nodes reached from `root` in breadth-first order on a sunflower spiral around it
/// (the golden angle apart, radius growing with the square root of the rank): a part
/// fills a disc of area in proportion to its nodes, and nodes a few links apart start
/// near each other, so that a star is a disc around its switch, a tree grows outwards
/// from its root and a line winds out as a spiral.
fn tree(root: usize, adj: &[Vec<usize>], n: usize) -> Vec<(f32, f32)> {
    let mut seen = vec![false; n];
    let mut order = vec![root];
    seen[root] = true;
    let mut i = 0;
    while i < order.len() {
        for &m in &adj[order[i]] {
            if !seen[m] {
                seen[m] = true;
                order.push(m);
            }
        }
        i += 1;
    }
    const GOLDEN_ANGLE: f32 = 2.399_963;
    let mut pos = vec![(0.0, 0.0); n];
    for (rank, &v) in order.iter().enumerate() {
        let r = SPACING * 0.8 * (rank as f32).sqrt();
        let a = rank as f32 * GOLDEN_ANGLE;
        pos[v] = (r * a.cos(), r * a.sin());
    }
    pos
}

/// Each node's push away from the nodes within two spacings of it (those of its grid
/// cell and the eight around it): k²/d, as Fruchterman and Reingold's.
fn repulsion(pos: &[(f32, f32)], k: f32) -> Vec<(f32, f32)> {
    let cell = 2.0 * k;
    let key = |p: &(f32, f32)| ((p.0 / cell).floor() as i64, (p.1 / cell).floor() as i64);
    let mut grid: std::collections::HashMap<(i64, i64), Vec<usize>> = Default::default();
    for (i, p) in pos.iter().enumerate() {
        grid.entry(key(p)).or_default().push(i);
    }
    let mut push = vec![(0.0f32, 0.0f32); pos.len()];
    for (i, p) in pos.iter().enumerate() {
        let (cx, cy) = key(p);
        for gx in cx - 1..=cx + 1 {
            for gy in cy - 1..=cy + 1 {
                for &j in grid.get(&(gx, gy)).map_or(&[][..], |v| v.as_slice()) {
                    if j == i {
                        continue;
                    }
                    let (dx, dy) = (p.0 - pos[j].0, p.1 - pos[j].1);
                    let d2 = (dx * dx + dy * dy).max(0.01);
                    if d2 > cell * cell {
                        continue;
                    }
                    let f = k * k / d2;
                    push[i].0 += dx * f;
                    push[i].1 += dy * f;
                }
            }
        }
    }
    push
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linked_nodes_end_near_and_no_two_nodes_on_top_of_each_other() {
        // A line of 20.
        let edges: Vec<(usize, usize)> = (0..19).map(|i| (i, i + 1)).collect();
        let pos = layout(20, &edges);
        let d = |a: usize, b: usize| {
            let (dx, dy) = (pos[a].0 - pos[b].0, pos[a].1 - pos[b].1);
            (dx * dx + dy * dy).sqrt()
        };
        for &(a, b) in &edges {
            assert!(d(a, b) < 3.0 * SPACING, "{a}-{b}: {}", d(a, b));
        }
        for a in 0..20 {
            for b in a + 1..20 {
                assert!(d(a, b) > SPACING / 4.0, "{a} and {b} overlap");
            }
        }
        assert_eq!(pos, layout(20, &edges), "deterministic");
    }
}

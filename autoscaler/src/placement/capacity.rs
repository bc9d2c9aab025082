//! Free GPUs per node and the gang placement algorithm over them ([`Capacity`]): place a new
//! gang, grow a running one (own nodes, then its rack, then anywhere), and which GPUs a
//! shrinking job gives back ([`shrink_plan`]).

use super::rules::{Locality, Strategy};
use crate::cluster::{ClusterState, Slot};

/// Static facts about a node that placement needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeMeta {
    pub gpus: u32,
    pub rack: u32,
    pub speed: f64,
}

/// Free GPUs per node, and the placement algorithm over them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capacity {
    meta: Vec<NodeMeta>,
    free: Vec<u32>,
    healthy: Vec<bool>,
    racks: Vec<Vec<u32>>,
    total_free: u32,
    max_node_gpus: u32,
    scratch: Vec<u32>,
}

impl Capacity {
    /// All nodes healthy and empty.
    pub fn new(meta: Vec<NodeMeta>) -> Capacity {
        let free = meta.iter().map(|m| m.gpus).collect();
        let healthy = vec![true; meta.len()];
        let mut c = Capacity {
            meta,
            free,
            healthy,
            ..Default::default()
        };
        c.rebuild_index();
        c
    }

    /// The free GPUs a snapshot shows.
    pub fn from_snapshot(snap: &ClusterState) -> Capacity {
        let mut c = Capacity::default();
        c.reset_from(snap);
        c
    }

    /// Overwrites this with the free GPUs a snapshot shows (reusing the buffers).
    pub fn reset_from(&mut self, snap: &ClusterState) {
        let same_shape = self.meta.len() == snap.nodes.len()
            && self
                .meta
                .iter()
                .zip(&snap.nodes)
                .all(|(m, n)| m.gpus == n.gpus && m.rack == n.rack);
        if !same_shape {
            self.meta = snap
                .nodes
                .iter()
                .map(|n| NodeMeta {
                    gpus: n.gpus,
                    rack: n.rack,
                    speed: snap
                        .gpu_types
                        .get(usize::from(n.gpu_type))
                        .map_or(1.0, |t| t.speed),
                })
                .collect();
        }
        self.free.clear();
        self.free.extend(snap.nodes.iter().map(|n| n.free));
        self.healthy.clear();
        self.healthy.extend(snap.nodes.iter().map(|n| n.healthy));
        if same_shape {
            self.total_free = self.free.iter().sum();
            self.max_node_gpus = self.max_healthy_node();
        } else {
            self.rebuild_index();
        }
    }

    fn max_healthy_node(&self) -> u32 {
        self.meta
            .iter()
            .zip(&self.healthy)
            .filter(|(_, h)| **h)
            .map(|(m, _)| m.gpus)
            .max()
            .unwrap_or(0)
    }

    fn rebuild_index(&mut self) {
        let n_racks = self.meta.iter().map(|m| m.rack + 1).max().unwrap_or(0) as usize;
        self.racks = vec![Vec::new(); n_racks];
        for (i, m) in self.meta.iter().enumerate() {
            if let Some(r) = self.racks.get_mut(m.rack as usize) {
                r.push(i as u32);
            }
        }
        self.total_free = self.free.iter().sum();
        self.max_node_gpus = self.max_healthy_node();
    }

    /// Free GPUs in total.
    pub fn total_free(&self) -> u32 {
        self.total_free
    }

    /// Free GPUs of one node.
    pub fn free(&self, node: u32) -> u32 {
        self.free.get(node as usize).copied().unwrap_or(0)
    }

    /// Node facts.
    pub fn meta(&self) -> &[NodeMeta] {
        &self.meta
    }

    /// Whether a node is up.
    pub fn healthy(&self, node: u32) -> bool {
        self.healthy.get(node as usize).copied().unwrap_or(false)
    }

    /// Fewest nodes a gang of `gpus` can use.
    pub fn min_nodes(&self, gpus: u32) -> u32 {
        if self.max_node_gpus == 0 {
            return u32::MAX;
        }
        gpus.div_ceil(self.max_node_gpus)
    }

    /// Marks a node down: its GPUs are no longer free. The caller moves its jobs off first.
    pub fn set_down(&mut self, node: u32) {
        let i = node as usize;
        if let (Some(f), Some(h)) = (self.free.get_mut(i), self.healthy.get_mut(i)) {
            if *h {
                self.total_free -= *f;
                *f = 0;
                *h = false;
            }
        }
        self.max_node_gpus = self.max_healthy_node();
    }

    /// Marks a node up again, all its GPUs free.
    pub fn set_up(&mut self, node: u32) {
        let i = node as usize;
        if let (Some(f), Some(h), Some(m)) = (
            self.free.get_mut(i),
            self.healthy.get_mut(i),
            self.meta.get(i),
        ) {
            if !*h {
                *f = m.gpus;
                self.total_free += m.gpus;
                *h = true;
            }
        }
        self.max_node_gpus = self.max_healthy_node();
    }

    /// Gives back GPUs of a placement.
    pub fn release(&mut self, slots: &[Slot]) {
        for s in slots {
            let i = s.node as usize;
            if self.healthy.get(i).copied().unwrap_or(false) {
                if let Some(f) = self.free.get_mut(i) {
                    *f += s.gpus;
                    self.total_free += s.gpus;
                }
            }
        }
    }

    /// Takes back GPUs of a placement (undoes [`Capacity::release`]); false, changing nothing,
    /// when some of them are no longer free.
    pub fn occupy(&mut self, slots: &[Slot]) -> bool {
        if slots
            .iter()
            .any(|s| !self.healthy(s.node) || self.free(s.node) < s.gpus)
        {
            return false;
        }
        for s in slots {
            if let Some(f) = self.free.get_mut(s.node as usize) {
                *f -= s.gpus;
                self.total_free -= s.gpus;
            }
        }
        true
    }

    fn take(&mut self, node: u32, gpus: u32, out: &mut Vec<Slot>) {
        if let Some(f) = self.free.get_mut(node as usize) {
            *f -= gpus;
            self.total_free -= gpus;
        }
        if let Some(s) = out.iter_mut().find(|s| s.node == node) {
            s.gpus += gpus;
        } else {
            out.push(Slot { node, gpus });
        }
    }

    /// Best single node with at least `gpus` free under the strategy, among `nodes`.
    fn best_single(&self, gpus: u32, strategy: Strategy, nodes: Option<&[u32]>) -> Option<u32> {
        let mut best: Option<(u32, u32)> = None;
        let mut consider = |i: u32| {
            let f = self.free(i);
            if f < gpus || !self.healthy(i) {
                return;
            }
            let better = match best {
                None => true,
                Some((_, bf)) => match strategy {
                    Strategy::Pack => f < bf,
                    Strategy::Spread => f > bf,
                },
            };
            if better {
                best = Some((i, f));
            }
        };
        match nodes {
            Some(ns) => ns.iter().copied().for_each(&mut consider),
            None => (0..self.free.len() as u32).for_each(&mut consider),
        }
        best.map(|(i, _)| i)
    }

    /// Greedy multi-node pick over `nodes` (emptiest first); returns the nodes used and
    /// whether they reach `gpus`, without taking them.
    fn greedy(&mut self, gpus: u32, nodes: &[u32]) -> Option<usize> {
        let (free, healthy) = (&self.free, &self.healthy);
        self.scratch.clear();
        self.scratch.extend(nodes.iter().copied().filter(|&i| {
            healthy.get(i as usize).copied().unwrap_or(false)
                && free.get(i as usize).copied().unwrap_or(0) > 0
        }));
        self.scratch
            .sort_by(|&a, &b| free[b as usize].cmp(&free[a as usize]).then(a.cmp(&b)));
        let mut sum = 0;
        for (k, &i) in self.scratch.iter().enumerate() {
            sum += free[i as usize];
            if sum >= gpus {
                return Some(k + 1);
            }
        }
        None
    }

    fn take_greedy(&mut self, gpus: u32, used: usize, out: &mut Vec<Slot>) {
        let nodes: Vec<u32> = self.scratch.iter().take(used).copied().collect();
        let mut left = gpus;
        for i in nodes {
            let g = self.free(i).min(left);
            if g > 0 {
                self.take(i, g, out);
                left -= g;
            }
        }
    }

    /// Places a gang of `gpus` workers at `level`; on success takes the GPUs and appends the
    /// slots to `out`. All or nothing.
    pub fn place(
        &mut self,
        gpus: u32,
        level: Locality,
        strategy: Strategy,
        out: &mut Vec<Slot>,
    ) -> bool {
        if gpus == 0 || gpus > self.total_free {
            return false;
        }
        if gpus <= self.max_node_gpus {
            if let Some(n) = self.best_single(gpus, strategy, None) {
                self.take(n, gpus, out);
                return true;
            }
            if level == Locality::Consolidated && gpus <= self.max_node_gpus {
                return false;
            }
        }
        if level == Locality::Any {
            let all: Vec<u32> = (0..self.free.len() as u32).collect();
            return match self.greedy(gpus, &all) {
                Some(used) => {
                    self.take_greedy(gpus, used, out);
                    true
                }
                None => false,
            };
        }
        // one rack: pick the rack by strategy among those that can hold the gang
        let min_nodes = self.min_nodes(gpus) as usize;
        let mut best: Option<(usize, u32)> = None;
        for r in 0..self.racks.len() {
            let nodes = std::mem::take(&mut self.racks[r]);
            let used = self.greedy(gpus, &nodes);
            let rack_free: u32 = nodes.iter().map(|&i| self.free(i)).sum();
            self.racks[r] = nodes;
            let Some(used) = used else { continue };
            if level == Locality::Consolidated && used > min_nodes {
                continue;
            }
            let better = match best {
                None => true,
                Some((_, bf)) => match strategy {
                    Strategy::Pack => rack_free < bf,
                    Strategy::Spread => rack_free > bf,
                },
            };
            if better {
                best = Some((r, rack_free));
            }
        }
        let Some((r, _)) = best else { return false };
        let nodes = std::mem::take(&mut self.racks[r]);
        let used = self.greedy(gpus, &nodes);
        self.racks[r] = nodes;
        match used {
            Some(used) => {
                self.take_greedy(gpus, used, out);
                true
            }
            None => false,
        }
    }

    /// Hides the free GPUs of the nodes `allowed` marks false (a mask by node index; nodes
    /// past its end are hidden too) until [`Capacity::unhide`]; returns what was hidden.
    fn hide(&mut self, allowed: &[bool]) -> Vec<Slot> {
        let mut hidden = Vec::new();
        for (i, f) in self.free.iter_mut().enumerate() {
            if *f > 0 && !allowed.get(i).copied().unwrap_or(false) {
                hidden.push(Slot {
                    node: i as u32,
                    gpus: *f,
                });
                self.total_free -= *f;
                *f = 0;
            }
        }
        self.max_node_gpus = self
            .meta
            .iter()
            .zip(&self.healthy)
            .enumerate()
            .filter(|(i, (_, h))| **h && allowed.get(*i).copied().unwrap_or(false))
            .map(|(_, (m, _))| m.gpus)
            .max()
            .unwrap_or(0);
        hidden
    }

    /// Gives back what [`Capacity::hide`] hid.
    fn unhide(&mut self, hidden: &[Slot]) {
        for s in hidden {
            if let Some(f) = self.free.get_mut(s.node as usize) {
                *f += s.gpus;
                self.total_free += s.gpus;
            }
        }
        self.max_node_gpus = self.max_healthy_node();
    }

    /// As [`Capacity::place`], on the nodes `allowed` marks true only (one GPU type's nodes).
    pub fn place_within(
        &mut self,
        gpus: u32,
        level: Locality,
        strategy: Strategy,
        allowed: &[bool],
        out: &mut Vec<Slot>,
    ) -> bool {
        let hidden = self.hide(allowed);
        let ok = self.place(gpus, level, strategy, out);
        self.unhide(&hidden);
        ok
    }

    /// As [`Capacity::grow`], on the nodes `allowed` marks true only.
    pub fn grow_within(
        &mut self,
        current: &[Slot],
        extra: u32,
        strategy: Strategy,
        allowed: &[bool],
        out: &mut Vec<Slot>,
    ) -> bool {
        let hidden = self.hide(allowed);
        let ok = self.grow(current, extra, strategy, out);
        self.unhide(&hidden);
        ok
    }

    /// Places `gpus` more workers of a job placed on `current` within its rack, when all of
    /// it is in one rack: on one node of that rack if one has room, else over the rack's
    /// nodes (emptiest first). Growing across racks would slow the whole job (cross-rack
    /// traffic), so growth stays in the rack while the rack has room. Takes the GPUs on
    /// success.
    fn grow_in_rack(
        &mut self,
        current: &[Slot],
        gpus: u32,
        strategy: Strategy,
        out: &mut Vec<Slot>,
    ) -> bool {
        let rack_of = |s: &Slot| self.meta.get(s.node as usize).map(|m| m.rack);
        let Some(rack) = current.first().and_then(rack_of) else {
            return false;
        };
        if current.iter().any(|s| rack_of(s) != Some(rack)) {
            return false;
        }
        let Some(nodes) = self.racks.get_mut(rack as usize).map(std::mem::take) else {
            return false;
        };
        let mut done = false;
        if let Some(n) = self.best_single(gpus, strategy, Some(&nodes)) {
            self.take(n, gpus, out);
            done = true;
        } else if let Some(used) = self.greedy(gpus, &nodes) {
            self.take_greedy(gpus, used, out);
            done = true;
        }
        if let Some(slot) = self.racks.get_mut(rack as usize) {
            *slot = nodes;
        }
        done
    }

    /// Adds `extra` workers to a running job placed on `current`: first on its own nodes,
    /// then within its rack (one node, else several), then on one node, then anywhere. On
    /// success takes the GPUs and appends the new slots to `out`. All or nothing.
    pub fn grow(
        &mut self,
        current: &[Slot],
        extra: u32,
        strategy: Strategy,
        out: &mut Vec<Slot>,
    ) -> bool {
        if extra == 0 {
            return true;
        }
        if extra > self.total_free {
            return false;
        }
        let mut left = extra;
        let mut taken: Vec<Slot> = Vec::new();
        for s in current {
            let g = self.free(s.node).min(left);
            if g > 0 && self.healthy(s.node) {
                self.take(s.node, g, &mut taken);
                left -= g;
            }
        }
        if left > 0 && self.grow_in_rack(current, left, strategy, &mut taken) {
            left = 0;
        }
        if left > 0 && !self.place(left, Locality::Any, strategy, &mut taken) {
            self.release(&taken);
            return false;
        }
        for t in taken {
            if let Some(s) = out.iter_mut().find(|s| s.node == t.node) {
                s.gpus += t.gpus;
            } else {
                out.push(t);
            }
        }
        true
    }
}

/// Which GPUs a job placed on `current` gives back when it drops `remove` workers: from the
/// nodes where it has the fewest first (keeps it consolidated). Appends to `out`.
pub fn shrink_plan(current: &[Slot], remove: u32, out: &mut Vec<Slot>) {
    let mut order: Vec<usize> = (0..current.len()).collect();
    order.sort_by(|&a, &b| current[a].gpus.cmp(&current[b].gpus).then(b.cmp(&a)));
    let mut left = remove;
    for i in order {
        if left == 0 {
            break;
        }
        let s = current[i];
        let g = s.gpus.min(left);
        out.push(Slot {
            node: s.node,
            gpus: g,
        });
        left -= g;
    }
}

/// Removes `released` from `current` (slots that reach 0 GPUs disappear).
pub fn subtract(current: &mut Vec<Slot>, released: &[Slot]) {
    for r in released {
        if let Some(s) = current.iter_mut().find(|s| s.node == r.node) {
            s.gpus = s.gpus.saturating_sub(r.gpus);
        }
    }
    current.retain(|s| s.gpus > 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(nodes: u32, gpus: u32, per_rack: u32) -> Capacity {
        Capacity::new(
            (0..nodes)
                .map(|i| NodeMeta {
                    gpus,
                    rack: i / per_rack,
                    speed: 1.0,
                })
                .collect(),
        )
    }

    #[test]
    fn pack_fills_the_fullest_node_and_spread_the_emptiest() {
        let mut c = cap(3, 8, 3);
        let mut out = Vec::new();
        assert!(c.place(5, Locality::Consolidated, Strategy::Pack, &mut out));
        assert_eq!(out, vec![Slot { node: 0, gpus: 5 }]);
        out.clear();
        assert!(c.place(2, Locality::Consolidated, Strategy::Pack, &mut out));
        assert_eq!(out, vec![Slot { node: 0, gpus: 2 }]);
        out.clear();
        assert!(c.place(2, Locality::Consolidated, Strategy::Spread, &mut out));
        assert_eq!(out[0].gpus, 2);
        assert_ne!(out[0].node, 0);
        assert_eq!(c.total_free(), 24 - 9);
    }

    #[test]
    fn locality_relaxes_from_one_node_to_one_rack_to_anywhere() {
        // 4 nodes × 4 GPUs, 2 per rack; 3 GPUs busy on each node of rack 0 and 2 on rack 1
        let mut c = cap(4, 4, 2);
        let mut sink = Vec::new();
        for (n, g) in [(0, 3), (1, 3), (2, 2), (3, 2)] {
            let mut one = Vec::new();
            assert!(c.grow(&[Slot { node: n, gpus: 0 }], g, Strategy::Pack, &mut one));
            sink.extend(one);
        }
        assert_eq!(c.total_free(), 6);
        let mut out = Vec::new();
        // 4 GPUs: no single node has them → not consolidated; rack 1 has 2+2 → rack level
        assert!(!c.place(4, Locality::Consolidated, Strategy::Pack, &mut out));
        assert!(c.place(4, Locality::Rack, Strategy::Pack, &mut out));
        assert!(out.iter().all(|s| s.node >= 2));
        // 2 left, one in each node of rack 0: only `Any`... both are in rack 0, so Rack works
        out.clear();
        assert!(c.place(2, Locality::Rack, Strategy::Pack, &mut out));
        assert_eq!(c.total_free(), 0);
        assert!(!c.place(1, Locality::Any, Strategy::Pack, &mut out));
    }

    #[test]
    fn growth_stays_in_the_jobs_rack_while_it_has_room() {
        // 4 nodes × 8 GPUs, 2 per rack. The job holds all of node 0 (rack 0); node 1 (rack 0)
        // has 4 free, node 2 (rack 1) has 2 free, node 3 (rack 1) none.
        let mut c = cap(4, 8, 2);
        let mut busy = Vec::new();
        for (n, g) in [(0, 8), (1, 4), (2, 6), (3, 8)] {
            assert!(c.grow(&[Slot { node: n, gpus: 0 }], g, Strategy::Pack, &mut busy));
        }
        let job = [Slot { node: 0, gpus: 8 }];
        // PACK alone would take the fullest node that fits (node 2, in the other rack)
        let mut probe = c.clone();
        let mut out = Vec::new();
        assert!(probe.place(2, Locality::Any, Strategy::Pack, &mut out));
        assert_eq!(out, vec![Slot { node: 2, gpus: 2 }]);
        // growth takes node 1, in the job's rack
        out.clear();
        assert!(c.grow(&job, 2, Strategy::Pack, &mut out));
        assert_eq!(out, vec![Slot { node: 1, gpus: 2 }]);
        // the rack has 2 left; 4 more go across racks (the only way), all or nothing
        out.clear();
        assert!(c.grow(&job, 4, Strategy::Pack, &mut out));
        assert_eq!(out.iter().map(|s| s.gpus).sum::<u32>(), 4);
        assert_eq!(c.total_free(), 0);
    }

    #[test]
    fn gang_is_all_or_nothing() {
        let mut c = cap(2, 4, 1);
        let mut out = Vec::new();
        assert!(!c.place(9, Locality::Any, Strategy::Pack, &mut out));
        assert!(out.is_empty());
        assert_eq!(c.total_free(), 8);
        assert!(c.place(8, Locality::Any, Strategy::Pack, &mut out));
        assert_eq!(out.iter().map(|s| s.gpus).sum::<u32>(), 8);
    }

    #[test]
    fn shrink_gives_back_the_smallest_slots_first() {
        let cur = [Slot { node: 0, gpus: 4 }, Slot { node: 1, gpus: 1 }];
        let mut out = Vec::new();
        shrink_plan(&cur, 2, &mut out);
        assert_eq!(
            out,
            vec![Slot { node: 1, gpus: 1 }, Slot { node: 0, gpus: 1 }]
        );
        let mut cur = cur.to_vec();
        subtract(&mut cur, &out);
        assert_eq!(cur, vec![Slot { node: 0, gpus: 3 }]);
    }

    #[test]
    fn down_nodes_hold_nothing() {
        let mut c = cap(2, 4, 2);
        c.set_down(1);
        assert_eq!(c.total_free(), 4);
        let mut out = Vec::new();
        assert!(!c.place(5, Locality::Any, Strategy::Pack, &mut out));
        c.set_up(1);
        assert!(c.place(5, Locality::Any, Strategy::Pack, &mut out));
    }
}

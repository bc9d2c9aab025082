//! The queue state's forward view: expected remaining run times of running jobs, the
//! shadow time until a request fits, and a fast simulation of the queue (FCFS with EASY
//! backfilling) giving a job's simulated wait.

use super::state::{QueueJob, QueueState, Running, SimRuntime};

/// Upper limit on simulated events per forward simulation (bounds the worst case).
const MAX_SIM_STEPS: usize = 20_000;
/// Wait reported when the simulation cannot place the job (a week).
const SIM_NEVER: f64 = 7.0 * 86_400.0;

impl QueueState {
    /// Expected remaining run time at `now` of a running job under `mode`: the predicted
    /// run time minus the time elapsed, or half the elapsed time for a job that has
    /// outlived its prediction (heavy tails), never past its requested limit.
    pub(super) fn remaining(r: &Running, now: f64, mode: SimRuntime) -> f64 {
        let elapsed = (now - r.start).max(0.0);
        let rem = match (mode, r.job.requested) {
            (SimRuntime::Requested, Some(req)) => req - elapsed,
            _ => {
                let p = r.job.predicted_runtime;
                let rem = if p > elapsed {
                    p - elapsed
                } else {
                    0.5 * elapsed
                };
                match r.job.requested {
                    Some(req) => rem.min(req - elapsed),
                    None => rem,
                }
            }
        };
        rem.max(1.0)
    }

    /// Running jobs' (end time, resource) under `mode`, soonest first.
    fn planned_ends(&self, now: f64, mode: SimRuntime) -> Vec<(f64, f64)> {
        let mut ends: Vec<(f64, f64)> = self
            .running
            .values()
            .map(|r| (now + Self::remaining(r, now, mode), r.job.resource))
            .collect();
        // elements that compare equal are the same bits, so the unstable sort's order is
        // the stable one's
        ends.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        ends
    }

    /// Seconds from `now` until `need` resource is free if running jobs end as planned and
    /// nothing else starts (the features take it from a [`SimCache`]).
    #[cfg(test)]
    fn shadow_wait(&self, need: f64, now: f64, mode: SimRuntime) -> f64 {
        let need = need.min(self.capacity);
        let free = self.capacity - self.busy;
        if need <= free {
            return 0.0;
        }
        shadow_over(need, free, &self.planned_ends(now, mode), now)
    }

    /// Simulated wait of `job`, submitted at `now` behind the queued jobs: first come first
    /// served with EASY backfilling (the head job gets a reservation at the earliest time
    /// enough resource frees; a later job may start early if it fits now and ends before
    /// that reservation or uses only resource the head will not need). Run times under
    /// `mode`. Requests larger than the capacity are clamped to it.
    ///
    /// The backfill pass visits, in queue order, only the jobs that may start (found with
    /// a [`Pending`] tree), and the running ends are a sorted list read from a moving start:
    /// the same decisions in the same order as scanning every queued job and every end.
    pub fn simulate_wait(&self, job: &QueueJob, now: f64, mode: SimRuntime) -> f64 {
        let (res, rt) = Sim::inputs(self.capacity, job, mode);
        Sim::new(self, now, mode, (res, rt), None).run(self)
    }
}

/// The shadow wait over running ends `planned` (soonest first) when `free` is short of
/// `need`: the first end after which it is not.
fn shadow_over(need: f64, mut free: f64, planned: &[(f64, f64)], now: f64) -> f64 {
    for &(t, res) in planned {
        free += res;
        if need <= free {
            return t - now;
        }
    }
    SIM_NEVER
}

/// The forward simulations of the last job asked about (one per run-time mode), kept
/// between the jobs of a replay: when the next job is submitted at the same instant right
/// after it, with no start or end between (a job array: two thirds of Graham's submits),
/// its simulation is the last one resumed where that job started, with the new job
/// appended (it is last in the queue, so nothing before its own start depends on it).
/// Also keeps the running jobs' sorted planned ends for the shadow wait.
#[derive(Default)]
pub(super) struct SimCache {
    runs: [Option<Sim>; 2],
    /// How many waits were found by resuming, and how many of those from a pass already
    /// simulated (for the tests).
    #[cfg(test)]
    resumed: [usize; 2],
}

impl SimCache {
    /// `(shadow_wait, simulate_wait)` of `job`, about to be submitted at `now`, under
    /// `mode`: the same numbers, reusing the last simulation when it can.
    pub(super) fn waits(
        &mut self,
        state: &QueueState,
        job: &QueueJob,
        now: f64,
        mode: SimRuntime,
    ) -> (f64, f64) {
        let slot = &mut self.runs[usize::from(mode == SimRuntime::Requested)];
        let ours = Sim::inputs(state.capacity, job, mode);
        let (wait, sim) = match slot.take() {
            Some(mut sim) if sim.resumable(state, now) => {
                #[cfg(test)]
                {
                    self.resumed[0] += 1;
                    self.resumed[1] += usize::from(sim.started_in_passes(ours).is_some());
                }
                (sim.resume(state, ours), sim)
            }
            old => {
                // the running jobs are the same: their sorted ends are too
                let planned = old
                    .filter(|s| s.same_running(state, now))
                    .and_then(Sim::into_planned);
                let mut sim = Sim::new(state, now, mode, ours, planned);
                (sim.run(state), sim)
            }
        };
        let sim = slot.insert(sim);
        let need = job.resource.min(state.capacity);
        let free = state.capacity - state.busy;
        let shadow = if need <= free {
            0.0
        } else {
            sim.fill_planned(state);
            shadow_over(need, free, &sim.ends.planned, now)
        };
        (shadow, wait)
    }
}

/// Where a simulation paused at its job's start stopped.
#[derive(Clone, Copy)]
enum At {
    /// In the head loop of the current step (the job is the head and fits).
    Head,
    /// In the backfill pass of the current step: the head's reservation, the resource the
    /// head will not need then, and the first job the pass has still to look at.
    Backfill {
        shadow: f64,
        extra: f64,
        from: usize,
    },
}

/// One forward simulation of [`QueueState::simulate_wait`], as a state that can stop where
/// its job (the last in the queue) starts and go on with another job appended.
struct Sim {
    /// What it was started from: the instant, the state's capacity and change count, and
    /// the queue sequence number its job gets when submitted.
    now: f64,
    capacity: f64,
    changes: u64,
    seq: u64,
    mode: SimRuntime,
    /// (resource, run time) of the queued jobs; the job asked about last.
    queue: Vec<(f64, f64)>,
    pending: Pending,
    ends: Ends,
    /// Whether `ends` holds the running jobs' ends (the first head loop does not need them).
    planned: bool,
    free: f64,
    head: usize,
    t: f64,
    step: usize,
    at: At,
    /// (t, free, extra, reservation) at the end of each backfill pass done.
    passes: Vec<[f64; 4]>,
    /// Whether it stopped at its job's start (else it gave up: no later job can start).
    paused: bool,
}

impl Sim {
    /// The (resource, run time) the simulation gives `job`.
    fn inputs(capacity: f64, job: &QueueJob, mode: SimRuntime) -> (f64, f64) {
        (job.resource.min(capacity), job.runtime(mode).max(1.0))
    }

    fn new(
        state: &QueueState,
        now: f64,
        mode: SimRuntime,
        ours: (f64, f64),
        planned: Option<Vec<(f64, f64)>>,
    ) -> Sim {
        let cap = state.capacity;
        let mut queue: Vec<(f64, f64)> = Vec::with_capacity(state.queued.len() + 1);
        queue.extend(
            state
                .queued
                .values()
                .map(|(_, j)| Self::inputs(cap, j, mode)),
        );
        queue.push(ours);
        let pending = Pending::new(&queue);
        Sim {
            now,
            capacity: cap,
            changes: state.changes,
            seq: state.next_seq,
            mode,
            queue,
            pending,
            planned: planned.is_some(),
            ends: Ends::new(planned.unwrap_or_default()),
            free: cap - state.busy,
            head: 0,
            t: now,
            step: 0,
            at: At::Head,
            passes: Vec::new(),
            paused: false,
        }
    }

    /// Whether `state` at `now` holds the same running jobs as when it started.
    fn same_running(&self, state: &QueueState, now: f64) -> bool {
        self.now.to_bits() == now.to_bits()
            && self.changes == state.changes
            && self.capacity.to_bits() == state.capacity.to_bits()
    }

    /// The running jobs' sorted ends, if computed (unchanged by the simulation: it reads
    /// them from a moving start).
    fn into_planned(self) -> Option<Vec<(f64, f64)>> {
        self.planned.then_some(self.ends.planned)
    }

    fn fill_planned(&mut self, state: &QueueState) {
        if !self.planned {
            self.ends.planned = state.planned_ends(self.now, self.mode);
            self.planned = true;
        }
    }

    /// Whether `state` at `now` is the state it simulated with its job submitted and
    /// nothing else (no start, end or other submit).
    fn resumable(&self, state: &QueueState, now: f64) -> bool {
        let Some(&ours) = self.queue.last() else {
            return false;
        };
        self.paused
            && self.same_running(state, now)
            && state.next_seq == self.seq + 1
            && state.queued.len() == self.queue.len()
            && state.queued.last_key_value().is_some_and(|(&seq, (_, j))| {
                let got = Self::inputs(self.capacity, j, self.mode);
                seq == self.seq
                    && got.0.to_bits() == ours.0.to_bits()
                    && got.1.to_bits() == ours.1.to_bits()
            })
    }

    /// The first pass done at whose end a job of (resource, run time) `ours`, appended
    /// after the paused job, would be backfilled; its time.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    fn started_in_passes(&self, ours: (f64, f64)) -> Option<f64> {
        let &last = self.queue.last()?;
        // every pass done ended with the last job not started: the same job cannot start
        // in one either
        if last.0.to_bits() == ours.0.to_bits() && last.1.to_bits() == ours.1.to_bits() {
            return None;
        }
        self.passes
            .iter()
            .find(|&&[t, free, extra, shadow]| {
                // the pass's own tests: it stops once nothing is free
                !(free <= 0.0) && Pending::may_start(ours, free, extra, t, shadow)
            })
            .map(|p| p[0])
    }

    /// The wait of a job of (resource, run time) `ours` submitted right after the paused
    /// one (see [`Sim::resumable`]). Until it starts nothing depends on it: it starts at
    /// the end of a pass already done (the paused job and those after it are not started
    /// there), or the simulation goes on from the paused job's start with it appended.
    fn resume(&mut self, state: &QueueState, ours: (f64, f64)) -> f64 {
        if let Some(t) = self.started_in_passes(ours) {
            self.paused = false;
            return t - self.now;
        }
        let prev = self.queue.len() - 1;
        let (res, rt) = self.queue[prev];
        let t = self.t;
        if let At::Backfill {
            shadow, mut extra, ..
        } = self.at
        {
            let ends_in_time = t + rt <= shadow;
            if !ends_in_time {
                extra -= res;
            }
            self.at = At::Backfill {
                shadow,
                extra,
                from: prev + 1,
            };
            self.pending.start(prev);
        } else {
            // a head's start is not marked in the tree (see the head loop)
            self.head += 1;
        }
        self.free -= res;
        self.ends.push((t + rt, res));
        self.queue.push(ours);
        self.pending.push(ours);
        self.seq += 1;
        self.run(state)
    }

    /// Runs until the last job starts (the wait; paused there) or the simulation gives up.
    fn run(&mut self, state: &QueueState) -> f64 {
        self.paused = false;
        let ours = self.queue.len() - 1;
        let now = self.now;
        while self.step < MAX_SIM_STEPS {
            match self.at {
                At::Head => {
                    // start jobs in order while the head fits
                    while self.head < self.queue.len() {
                        if self.pending.started(self.head) {
                            self.head += 1;
                            continue;
                        }
                        let (res, rt) = self.queue[self.head];
                        if res > self.free {
                            break;
                        }
                        if self.head == ours {
                            self.paused = true;
                            return self.t - now;
                        }
                        // not marked in the tree: the backfill pass only looks after the
                        // head, and the head loop never comes back
                        self.free -= res;
                        self.ends.push((self.t + rt, res));
                        self.head += 1;
                    }
                    if self.head >= self.queue.len() {
                        return self.t - now;
                    }
                    self.fill_planned(state);
                    // reservation for the head
                    let need = self.queue[self.head].0;
                    let mut f = self.free;
                    let mut shadow = f64::INFINITY;
                    for (te, res) in self.ends.iter() {
                        if shadow.is_finite() && te > shadow {
                            break;
                        }
                        f += res;
                        if shadow.is_infinite() && need <= f {
                            // everything ending at the same instant frees too
                            shadow = te;
                        }
                    }
                    let extra = if shadow.is_finite() { f - need } else { 0.0 };
                    self.at = At::Backfill {
                        shadow,
                        extra,
                        from: self.head + 1,
                    };
                }
                At::Backfill {
                    shadow,
                    mut extra,
                    mut from,
                } => {
                    // backfill: the queued jobs after the head that fit now and end before
                    // the reservation or use only resource the head will not need, in
                    // queue order
                    let t = self.t;
                    loop {
                        if self.free <= 0.0 {
                            break;
                        }
                        let Some(k) = self
                            .pending
                            .next_backfill(from, self.free, extra, t, shadow)
                        else {
                            break;
                        };
                        let (res, rt) = self.queue[k];
                        let ends_in_time = t + rt <= shadow;
                        if k == ours {
                            self.at = At::Backfill {
                                shadow,
                                extra,
                                from,
                            };
                            self.paused = true;
                            return t - now;
                        }
                        if !ends_in_time {
                            extra -= res;
                        }
                        self.free -= res;
                        self.pending.start(k);
                        self.ends.push((t + rt, res));
                        from = k + 1;
                    }
                    self.passes.push([t, self.free, extra, shadow]);
                    // advance to the next end
                    let Some(next) = self.ends.next_time() else {
                        return SIM_NEVER;
                    };
                    self.t = t.max(next);
                    while let Some(res) = self.ends.pop_until(self.t) {
                        self.free += res;
                    }
                    if self.t - now > SIM_NEVER {
                        return SIM_NEVER;
                    }
                    self.at = At::Head;
                    self.step += 1;
                }
            }
        }
        SIM_NEVER
    }
}

/// The planned ends (end time, resource) of a forward simulation, soonest first: the running
/// jobs' (sorted once, read from a moving start) and those the simulation starts
/// ([`AddedEnds`]). Read as one list in which each started job's end follows every end not
/// later than it, in the order they were added: the order that inserting into one sorted
/// list after its equals gives, so every sum over it keeps its bits.
struct Ends {
    planned: Vec<(f64, f64)>,
    first: usize,
    added: AddedEnds,
    seq: u64,
}

/// The ends a simulation adds, sorted by [`end_key`] (end time, then the order added), with
/// their resource: a sorted run read from a moving start and a short sorted run of the
/// newest, merged into the long one when it fills. A new end shifts at most the short run,
/// where one sorted list shifts half of the added ends on every start; the merge is linear,
/// once per `RECENT_MAX` starts.
#[derive(Default)]
struct AddedEnds {
    sorted: Vec<(u128, f64)>,
    first: usize,
    recent: Vec<(u128, f64)>,
    /// The merge's buffer, kept to reuse its allocation.
    spare: Vec<(u128, f64)>,
}

/// Ends the short run of [`AddedEnds`] holds before it is merged.
const RECENT_MAX: usize = 64;

impl AddedEnds {
    fn push(&mut self, key: u128, res: f64) {
        let at = self.recent.partition_point(|&(k, _)| k < key);
        self.recent.insert(at, (key, res));
        if self.recent.len() >= RECENT_MAX {
            let mut merged = std::mem::take(&mut self.spare);
            merged.clear();
            merge_runs(&self.sorted[self.first..], &self.recent, &mut merged);
            self.spare = std::mem::replace(&mut self.sorted, merged);
            self.first = 0;
            self.recent.clear();
        }
    }

    /// The soonest end.
    fn front(&self) -> Option<(u128, f64)> {
        self.iter().next()
    }

    /// Removes the soonest end (keys are distinct: it is the short run's first or the long
    /// run's).
    fn pop_front(&mut self) {
        let Some((soonest, _)) = self.front() else {
            return;
        };
        if self.recent.first().is_some_and(|&(k, _)| k == soonest) {
            self.recent.remove(0);
        } else {
            self.first += 1;
        }
    }

    /// The ends, soonest first.
    fn iter(&self) -> Merged<'_> {
        Merged::new(&self.sorted[self.first..], &self.recent)
    }
}

/// Appends to `out` the long run `long` and the short run `short` (both sorted by distinct
/// keys) as one sorted run: what [`Merged`] reads, in the same order, but each stretch of the
/// long run between two short-run keys found by a binary search and copied whole, instead of
/// one comparison and one branch per element.
fn merge_runs(long: &[(u128, f64)], short: &[(u128, f64)], out: &mut Vec<(u128, f64)>) {
    out.reserve(long.len() + short.len());
    let mut rest = long;
    for &end in short {
        let at = rest.partition_point(|&(k, _)| k < end.0);
        out.extend_from_slice(&rest[..at]);
        out.push(end);
        rest = &rest[at..];
    }
    out.extend_from_slice(rest);
}

/// Two runs sorted by distinct keys, read as one sorted run.
struct Merged<'a> {
    a: &'a [(u128, f64)],
    b: &'a [(u128, f64)],
}

impl<'a> Merged<'a> {
    fn new(a: &'a [(u128, f64)], b: &'a [(u128, f64)]) -> Self {
        Merged { a, b }
    }
}

impl Iterator for Merged<'_> {
    type Item = (u128, f64);
    fn next(&mut self) -> Option<(u128, f64)> {
        let take_b = match (self.a.first(), self.b.first()) {
            (Some(x), Some(y)) => y.0 < x.0,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        let run = if take_b { &mut self.b } else { &mut self.a };
        let (&first, rest) = run.split_first()?;
        *run = rest;
        Some(first)
    }
}

/// The sort key of an end added `seq`-th: its time's bits mapped so that unsigned order is
/// `f64::total_cmp`'s (end times are finite and positive here, where that is `<=`'s), above
/// `seq`. One integer compares faster than a (time, seq) pair and orders them the same.
fn end_key(end: f64, seq: u64) -> u128 {
    let b = end.to_bits();
    // positives above negatives; negatives' magnitudes reversed
    let ordered = if b >> 63 == 0 { b | (1 << 63) } else { !b };
    (u128::from(ordered) << 64) | u128::from(seq)
}

/// The end time of an [`end_key`] (the mapping is one to one).
fn end_time(key: u128) -> f64 {
    let ordered = (key >> 64) as u64;
    f64::from_bits(if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    })
}

impl Ends {
    fn new(planned: Vec<(f64, f64)>) -> Ends {
        Ends {
            planned,
            first: 0,
            added: AddedEnds::default(),
            seq: 0,
        }
    }

    /// A started job's end.
    fn push(&mut self, (end, res): (f64, f64)) {
        self.added.push(end_key(end, self.seq), res);
        self.seq += 1;
    }

    /// The ends still to come, soonest first (a planned end before an added one at the
    /// same time: it was in the list first).
    fn iter(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        let mut planned = self.planned[self.first..].iter().copied().peekable();
        let mut added = self.added.iter().map(|(k, r)| (end_time(k), r)).peekable();
        std::iter::from_fn(move || match (planned.peek(), added.peek()) {
            (Some(p), Some(a)) if a.0 < p.0 => added.next(),
            (Some(_), _) => planned.next(),
            (None, _) => added.next(),
        })
    }

    /// The soonest end still to come.
    fn next_time(&self) -> Option<f64> {
        self.iter().next().map(|(e, _)| e)
    }

    /// Takes the soonest end if it is not after `t`, and returns its resource.
    fn pop_until(&mut self, t: f64) -> Option<f64> {
        let p = self.planned.get(self.first).copied();
        let a = self.added.front().map(|(k, r)| (end_time(k), r));
        match (p, a) {
            (Some(p), Some(a)) if a.0 < p.0 => (a.0 <= t).then(|| {
                self.added.pop_front();
                a.1
            }),
            (Some(p), _) => (p.0 <= t).then(|| {
                self.first += 1;
                p.1
            }),
            (None, Some(a)) => (a.0 <= t).then(|| {
                self.added.pop_front();
                a.1
            }),
            (None, None) => None,
        }
    }
}

/// The queued jobs of a forward simulation not started yet, as a tree of the smallest
/// resource and run time under each node, so that the backfill pass finds the next job
/// that may start without visiting those that cannot.
struct Pending {
    /// Leaves from `size`: (resource, run time) of each queued job, +inf once backfilled (a
    /// job started as the head is left as it is: no search looks left of the head).
    min: Vec<(f64, f64)>,
    size: usize,
    /// Leaves in use.
    len: usize,
}

impl Pending {
    fn new(queue: &[(f64, f64)]) -> Pending {
        let size = queue.len().next_power_of_two().max(1);
        let mut min = vec![(f64::INFINITY, f64::INFINITY); 2 * size];
        min[size..size + queue.len()].copy_from_slice(queue);
        for i in (1..size).rev() {
            min[i] = Self::join(min[2 * i], min[2 * i + 1]);
        }
        Pending {
            min,
            size,
            len: queue.len(),
        }
    }

    /// Appends a queued job (doubling the tree when it is full).
    fn push(&mut self, job: (f64, f64)) {
        if self.len == self.size {
            let size = 2 * self.size;
            let mut min = vec![(f64::INFINITY, f64::INFINITY); 2 * size];
            min[size..size + self.len].copy_from_slice(&self.min[self.size..self.size + self.len]);
            for i in (1..size).rev() {
                min[i] = Self::join(min[2 * i], min[2 * i + 1]);
            }
            self.min = min;
            self.size = size;
        }
        let mut i = self.size + self.len;
        self.len += 1;
        self.min[i] = job;
        while i > 1 {
            i /= 2;
            self.min[i] = Self::join(self.min[2 * i], self.min[2 * i + 1]);
        }
    }

    fn join(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
        (a.0.min(b.0), a.1.min(b.1))
    }

    /// Whether job `k` was backfilled.
    fn started(&self, k: usize) -> bool {
        self.min[self.size + k].0 == f64::INFINITY
    }

    fn start(&mut self, k: usize) {
        let mut i = self.size + k;
        self.min[i] = (f64::INFINITY, f64::INFINITY);
        while i > 1 {
            i /= 2;
            self.min[i] = Self::join(self.min[2 * i], self.min[2 * i + 1]);
        }
    }

    /// Whether a job of the node's smallest resource and run time could be backfilled: a
    /// node fails when none of its jobs fits in `free`, or none ends by `shadow` and none
    /// fits in `extra` (addition is monotonic, so `t + rt > shadow` for the smallest run
    /// time holds for every one). At a leaf this is the backfill rule itself, written as
    /// the scan wrote it (a NaN `free` fits everything).
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    fn may_start(m: (f64, f64), free: f64, extra: f64, t: f64, shadow: f64) -> bool {
        !(m.0 > free) && (t + m.1 <= shadow || m.0 <= extra)
    }

    /// The first job at or after `from`, not started, that may be backfilled now.
    fn next_backfill(
        &self,
        from: usize,
        free: f64,
        extra: f64,
        t: f64,
        shadow: f64,
    ) -> Option<usize> {
        if from >= self.size {
            return None;
        }
        let ok = |i: usize| {
            let m = self.min[i];
            // a started job (or an empty leaf) never starts again
            m.0 != f64::INFINITY && Self::may_start(m, free, extra, t, shadow)
        };
        let mut i = self.size + from;
        loop {
            if ok(i) {
                if i >= self.size {
                    return Some(i - self.size);
                }
                // the leftmost child first; when it fails, its right sibling is next
                i *= 2;
                continue;
            }
            // on to the next subtree to the right: out of right children, then across
            while i & 1 == 1 {
                i /= 2;
                if i <= 1 {
                    return None;
                }
            }
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use augur_numeric::SplitMix64;

    use super::*;

    /// The simulation as a plain scan of every queued job and every end, kept to check
    /// that the faster one takes the same decisions.
    fn reference(state: &QueueState, job: &QueueJob, now: f64, mode: SimRuntime) -> f64 {
        let cap = state.capacity;
        let mut free = cap - state.busy;
        let mut ends = state.planned_ends(now, mode);
        // (resource, run time); the new job last
        let mut queue: Vec<(f64, f64)> = state
            .queued
            .values()
            .map(|(_, j)| (j.resource.min(cap), j.runtime(mode).max(1.0)))
            .collect();
        queue.push((job.resource.min(cap), job.runtime(mode).max(1.0)));
        let ours = queue.len() - 1;
        let mut started = vec![false; queue.len()];
        let mut head = 0usize;
        let mut t = now;
        let insert_end = |ends: &mut Vec<(f64, f64)>, e: (f64, f64)| {
            let pos = ends.partition_point(|x| x.0 <= e.0);
            ends.insert(pos, e);
        };
        for _ in 0..MAX_SIM_STEPS {
            // start jobs in order while the head fits
            while head < queue.len() {
                if started[head] {
                    head += 1;
                    continue;
                }
                let (res, rt) = queue[head];
                if res > free {
                    break;
                }
                if head == ours {
                    return t - now;
                }
                free -= res;
                started[head] = true;
                insert_end(&mut ends, (t + rt, res));
                head += 1;
            }
            if head >= queue.len() {
                return t - now;
            }
            // reservation for the head
            let need = queue[head].0;
            let mut f = free;
            let mut shadow = f64::INFINITY;
            for &(te, res) in &ends {
                if shadow.is_finite() && te > shadow {
                    break;
                }
                f += res;
                if shadow.is_infinite() && need <= f {
                    // everything ending at the same instant frees too
                    shadow = te;
                }
            }
            let mut extra = if shadow.is_finite() { f - need } else { 0.0 };
            // backfill
            for k in head + 1..queue.len() {
                if free <= 0.0 {
                    break;
                }
                if started[k] {
                    continue;
                }
                let (res, rt) = queue[k];
                if res > free {
                    continue;
                }
                let ends_in_time = t + rt <= shadow;
                if ends_in_time || res <= extra {
                    if k == ours {
                        return t - now;
                    }
                    if !ends_in_time {
                        extra -= res;
                    }
                    free -= res;
                    started[k] = true;
                    insert_end(&mut ends, (t + rt, res));
                }
            }
            // advance to the next end
            if ends.is_empty() {
                return SIM_NEVER;
            }
            let next = ends[0].0;
            t = t.max(next);
            let n_done = ends.partition_point(|x| x.0 <= t);
            for (_, res) in ends.drain(..n_done) {
                free += res;
            }
            if t - now > SIM_NEVER {
                return SIM_NEVER;
            }
        }
        SIM_NEVER
    }

    fn job(rng: &mut SplitMix64, submit: f64, whole: bool) -> QueueJob {
        let resource = if whole {
            (1 + rng.below(16)) as f64
        } else {
            0.25 * (1 + rng.below(40)) as f64
        };
        QueueJob {
            submit,
            resource,
            requested: (rng.below(4) > 0).then(|| 60.0 * (1 + rng.below(600)) as f64),
            predicted_runtime: 30.0 * (1 + rng.below(400)) as f64,
            user: Some(rng.below(5) as u64),
            partition: None,
            cpus: 0.0,
            gpus: 0.0,
        }
    }

    /// Starts some queued jobs (not always in order, as backfill does) and ends some running
    /// ones, at `now`.
    fn churn(
        s: &mut QueueState,
        rng: &mut SplitMix64,
        (queued, running): (&mut Vec<u64>, &mut Vec<u64>),
        now: f64,
    ) {
        while !queued.is_empty() && rng.below(3) == 0 {
            let k = rng.below(queued.len().min(4));
            let q = queued.remove(k);
            s.start(q, now).unwrap();
            running.push(q);
        }
        while !running.is_empty() && rng.below(4) == 0 {
            let r = running.swap_remove(rng.below(running.len()));
            s.end(r, now).unwrap();
        }
    }

    #[test]
    fn the_pruned_backfill_takes_the_scans_decisions_to_the_bit() {
        let mut rng = SplitMix64(11);
        let mut checked = 0usize;
        let mut waited = 0usize;
        for round in 0..300 {
            let whole = round % 2 == 0;
            let capacity = (8 + rng.below(120)) as f64;
            let mut s = QueueState::new(capacity);
            let mut now = 0.0;
            let (mut queued, mut running): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
            for id in 0..(20 + rng.below(400)) as u64 {
                now += rng.below(120) as f64;
                let j = job(&mut rng, now, whole);
                for mode in [SimRuntime::Predicted, SimRuntime::Requested] {
                    let (fast, slow) =
                        (s.simulate_wait(&j, now, mode), reference(&s, &j, now, mode));
                    assert_eq!(fast.to_bits(), slow.to_bits(), "round {round} job {id}");
                    checked += 1;
                    waited += usize::from(fast > 0.0);
                }
                s.submit(id, j).unwrap();
                queued.push(id);
                churn(&mut s, &mut rng, (&mut queued, &mut running), now);
            }
        }
        assert!(
            checked > 50_000 && waited > checked / 4,
            "{checked} checked, {waited} waited"
        );
    }

    #[test]
    fn resumed_simulations_give_the_full_simulations_waits_to_the_bit() {
        let mut rng = SplitMix64(23);
        let (mut checked, mut resumed, mut from_passes) = (0usize, 0usize, 0usize);
        for round in 0..200 {
            let whole = round % 2 == 0;
            let capacity = (8 + rng.below(120)) as f64;
            let mut s = QueueState::new(capacity);
            let mut sims = SimCache::default();
            let mut now = 0.0;
            let (mut queued, mut running): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
            let mut last: Option<QueueJob> = None;
            for id in 0..(20 + rng.below(400)) as u64 {
                // a burst goes on (the same instant, no event between): a copy of the last
                // job (an array) or another job; else time passes and events happen
                let burst = last.is_some() && rng.below(3) > 0;
                let j = match last {
                    Some(prev) if burst && rng.below(3) > 0 => prev,
                    _ => {
                        if !burst {
                            now += rng.below(120) as f64;
                        }
                        job(&mut rng, now, whole)
                    }
                };
                for mode in [SimRuntime::Predicted, SimRuntime::Requested] {
                    let (shadow, wait) = sims.waits(&s, &j, now, mode);
                    let want = (
                        s.shadow_wait(j.resource, now, mode),
                        reference(&s, &j, now, mode),
                    );
                    assert_eq!(shadow.to_bits(), want.0.to_bits(), "round {round} job {id}");
                    assert_eq!(wait.to_bits(), want.1.to_bits(), "round {round} job {id}");
                    checked += 1;
                }
                s.submit(id, j).unwrap();
                queued.push(id);
                last = Some(j);
                if rng.below(3) > 0 {
                    continue;
                }
                churn(&mut s, &mut rng, (&mut queued, &mut running), now);
                // a queued job withdrawn now and then
                if !queued.is_empty() && rng.below(8) == 0 {
                    let q = queued.remove(rng.below(queued.len()));
                    s.end(q, now).unwrap();
                }
            }
            resumed += sims.resumed[0];
            from_passes += sims.resumed[1];
        }
        assert!(
            checked > 80_000 && resumed > checked / 3 && from_passes > 2_000,
            "{checked} checked, {resumed} resumed, {from_passes} from passes done"
        );
    }

    #[test]
    fn added_ends_read_as_one_sorted_list_through_merges_and_pops() {
        let mut rng = SplitMix64(29);
        for case in 0..40 {
            let mut got = AddedEnds::default();
            let mut want: std::collections::BTreeMap<u128, f64> = Default::default();
            let (mut seq, mut merges, mut pops) = (0u64, 0usize, 0usize);
            // in every other case few distinct times (ties go by the order added); pushes
            // outnumber pops, so the long run grows through many merges
            let steps = 200 + rng.below(3_000);
            for _ in 0..steps {
                if rng.below(3) == 0 {
                    assert_eq!(got.front(), want.first_key_value().map(|(&k, &r)| (k, r)));
                    if want.pop_first().is_some() {
                        pops += 1;
                    }
                    got.pop_front();
                } else {
                    let end = (1 + rng.below(if case % 2 == 0 { 50 } else { 100_000 })) as f64;
                    let key = end_key(end, seq);
                    let res = rng.below(9) as f64 * 0.5;
                    seq += 1;
                    let before = got.recent.len();
                    got.push(key, res);
                    merges += usize::from(got.recent.len() < before);
                    want.insert(key, res);
                }
                if rng.below(50) == 0 {
                    let all: Vec<(u128, f64)> = want.iter().map(|(&k, &r)| (k, r)).collect();
                    assert_eq!(got.iter().collect::<Vec<_>>(), all);
                }
            }
            let all: Vec<(u128, f64)> = want.iter().map(|(&k, &r)| (k, r)).collect();
            assert_eq!(got.iter().collect::<Vec<_>>(), all);
            assert!(pops > 0);
            if steps > 1_000 {
                assert!(merges >= 5, "case {case}: {merges} merges");
            }
        }
    }

    #[test]
    fn merging_runs_by_search_gives_the_merged_read() {
        let mut rng = SplitMix64(31);
        for case in 0..300 {
            // distinct keys dealt to the two runs; some cases leave a run empty or put the
            // whole short run before or after the long one
            let n = rng.below(400);
            let mut long = Vec::new();
            let mut short = Vec::new();
            for k in 0..n {
                let key = (k as u128) << 64 | rng.below(1 << 20) as u128;
                let to_short = match case % 4 {
                    0 => rng.below(8) == 0,
                    1 => k < n / 10,
                    2 => k >= n - n / 10,
                    _ => rng.below(2) == 0,
                };
                let res = rng.below(9) as f64 * 0.5;
                if to_short {
                    short.push((key, res))
                } else {
                    long.push((key, res))
                }
            }
            let mut out = vec![(7u128, 7.0)];
            merge_runs(&long, &short, &mut out);
            let want: Vec<_> = std::iter::once((7u128, 7.0))
                .chain(Merged::new(&long, &short))
                .collect();
            assert_eq!(out, want, "case {case}");
        }
    }

    #[test]
    fn end_keys_sort_as_total_cmp_then_the_order_added() {
        let mut rng = SplitMix64(17);
        // a few distinct times, so most are ties; signed zeros, infinities, NaNs, subnormals
        let pool: Vec<f64> = [
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            f64::MAX,
            f64::MIN,
            1.0,
            -1.0,
            1.5e9,
        ]
        .into_iter()
        .chain((0..40).map(|_| (rng.below(2_000_000) as f64 - 1e6) * 0.37))
        .collect();
        let times: Vec<f64> = (0..4_000).map(|_| pool[rng.below(pool.len())]).collect();
        let mut want: Vec<(f64, u64)> = times.iter().copied().zip(0u64..).collect();
        want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut keys: Vec<u128> = times
            .iter()
            .zip(0u64..)
            .map(|(&t, s)| end_key(t, s))
            .collect();
        keys.sort_unstable();
        let got: Vec<(u64, u64)> = keys
            .iter()
            .map(|&k| (end_time(k).to_bits(), k as u64))
            .collect();
        let want: Vec<(u64, u64)> = want.iter().map(|&(t, s)| (t.to_bits(), s)).collect();
        assert_eq!(got, want);
        let tied = want.windows(2).filter(|w| w[0].0 == w[1].0).count();
        assert!(tied > 3_000, "{tied} ties");
    }

    #[test]
    fn a_pending_tree_grown_by_appending_finds_what_a_new_one_finds() {
        let mut rng = SplitMix64(5);
        for n in 1..70usize {
            let jobs: Vec<(f64, f64)> = (0..n)
                .map(|_| ((1 + rng.below(16)) as f64, (1 + rng.below(100)) as f64))
                .collect();
            let mut grown = Pending::new(&jobs[..1]);
            for &j in &jobs[1..] {
                grown.push(j);
            }
            let mut fresh = Pending::new(&jobs);
            for k in 0..n {
                if rng.below(3) == 0 {
                    grown.start(k);
                    fresh.start(k);
                }
            }
            for from in 0..n {
                let free = rng.below(20) as f64;
                let extra = rng.below(8) as f64;
                let (a, b) = (
                    grown.next_backfill(from, free, extra, 0.0, 50.0),
                    fresh.next_backfill(from, free, extra, 0.0, 50.0),
                );
                assert_eq!(a, b, "{n} jobs from {from}");
            }
        }
    }
}

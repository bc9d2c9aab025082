//! # augur-numeric
//!
//! **One job:** the small numeric primitives every Augur crate shares, written once: the
//! quantile and median of a sample, the logistic function, and [`SplitMix64`], the one
//! seeded generator behind every sample, shuffle and initialisation in the workspace (so a
//! seed gives the same stream on every platform and in every crate). No dependencies, so the
//! lowest crates (datasets, models) can use it.

/// The `q`-quantile of `v` (linear interpolation between order statistics), NaN when empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    quantile_sorted(&s, q)
}

/// [`quantile`] of values already sorted ascending (NaN when empty; `q` clamped to [0, 1]).
pub fn quantile_sorted(s: &[f64], q: f64) -> f64 {
    if s.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// The median of `v` (mean of the two middle values for an even count), sorting `v` in
/// place; `None` when empty.
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(median_sorted(v))
}

/// The median of values already sorted ascending; NaN when empty.
pub fn median_sorted(s: &[f64]) -> f64 {
    let n = s.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => s[n / 2],
        _ => 0.5 * (s[n / 2 - 1] + s[n / 2]),
    }
}

/// [`median_sorted`] in single precision (feature histories are kept as `f32`).
pub fn median_sorted_f32(s: &[f32]) -> f32 {
    let n = s.len();
    match n {
        0 => f32::NAN,
        _ if n % 2 == 1 => s[n / 2],
        _ => 0.5 * (s[n / 2 - 1] + s[n / 2]),
    }
}

/// The logistic function 1 / (1 + e^−x). Safe for any finite or infinite `x` in `f64`
/// (e^−x overflowing to ∞ gives 0, underflowing gives 1).
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// [`sigmoid`] in single precision (the GRU's gates).
pub fn sigmoid_f32(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// SplitMix64 (Steele, Lea and Flood 2014): a tiny, fast, seedable generator with the same
/// stream on every platform. Its draws are named by their exact recipe, because the
/// workspace's seeded samples (tree subsampling, SVM row samples, fold assignment, the
/// simulator's elastic jobs) must not move when code is shared.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

/// The step SplitMix64 adds to its state on every draw.
const SPLITMIX_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(SPLITMIX_GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The generator after `k` more [`next_u64`](Self::next_u64) draws, without drawing
    /// them (the state only adds a fixed step per draw): stretches of one stream can then be
    /// drawn side by side.
    pub fn skipped(&self, k: u64) -> Self {
        SplitMix64(self.0.wrapping_add(k.wrapping_mul(SPLITMIX_GAMMA)))
    }

    /// Uniform in `[0, 1)` (the top 53 bits).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `(0, 1]`: safe to take the logarithm of.
    pub fn unit_open(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box–Muller on two [`SplitMix64::unit_open`] draws).
    pub fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.unit_open(), self.unit_open());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Uniform in `0..n` by multiply-shift of the top 32 bits (`n` ≤ 2³²; 0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }

    /// Uniform-ish in `0..n` by the remainder of all 64 bits (0 when `n` is 0): the recipe
    /// of the failure predictor's samples and the DAG folds.
    pub fn below_mod(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// [`below_mod`](Self::below_mod)`(n)`, the same draw and value, with the remainder by
    /// `n` taken by multiplications ([`RemBy`] of `n`): for many draws below one `n`.
    pub fn below_mod_by(&mut self, n: &RemBy) -> usize {
        n.rem(self.next_u64()) as usize
    }

    /// Fisher–Yates shuffle drawing with [`SplitMix64::below`].
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }

    /// Fisher–Yates shuffle drawing with [`SplitMix64::below_mod`].
    pub fn shuffle_mod<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below_mod(i + 1);
            v.swap(i, j);
        }
    }
}

/// The remainder by one divisor, by two wide multiplications instead of a division
/// (Lemire, Kaser and Kurz 2019, "Faster remainder by direct computation": with the 128-bit
/// multiplier ⌈2¹²⁸ / d⌉ the remainder is exact for every 64-bit dividend).
#[derive(Debug, Clone, Copy)]
pub struct RemBy {
    d: u64,
    /// ⌈2¹²⁸ / d⌉ (0 for d = 1, whose remainders are all 0).
    m: u128,
}

impl RemBy {
    /// The divisor `d`, taken as 1 when 0 (as `below_mod` takes it).
    pub fn new(d: u64) -> Self {
        let d = d.max(1);
        let m = if d == 1 {
            0
        } else {
            u128::MAX / u128::from(d) + 1
        };
        RemBy { d, m }
    }

    /// `x % d`.
    pub fn rem(&self, x: u64) -> u64 {
        let low = self.m.wrapping_mul(u128::from(x));
        let d = u128::from(self.d);
        // the high 64 bits of the 192-bit product low · d
        let bottom = (u128::from(low as u64) * d) >> 64;
        (((low >> 64) * d + bottom) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_medians_on_known_values() {
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), 2.0);
        assert_eq!(quantile(&[1.0, 2.0], 0.25), 1.25);
        assert_eq!(quantile_sorted(&[1.0, 2.0, 4.0], 2.0), 4.0);
        assert!(quantile(&[], 0.5).is_nan());
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
        assert_eq!(median_sorted_f32(&[1.0, 2.0]), 1.5);
    }

    #[test]
    fn sigmoid_is_bounded_and_symmetric() {
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(sigmoid(-1000.0), 0.0);
        assert_eq!(sigmoid(1000.0), 1.0);
        assert!((sigmoid(2.0) + sigmoid(-2.0) - 1.0).abs() < 1e-15);
    }

    #[test]
    fn splitmix_matches_the_reference_stream() {
        // first outputs of SplitMix64 seeded with 0 (reference implementation by Vigna)
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let mut a = SplitMix64(7);
        let u = a.unit();
        assert!((0.0..1.0).contains(&u));
        let mut v: Vec<u32> = (0..50).collect();
        SplitMix64(3).shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_ne!(v, sorted);
    }

    #[test]
    fn skipped_is_the_stream_after_that_many_draws() {
        for (seed, k) in [(0u64, 0u64), (0x5eed, 1), (u64::MAX, 3), (42, 1_000)] {
            let mut drawn = SplitMix64(seed);
            for _ in 0..k {
                drawn.next_u64();
            }
            let mut skipped = SplitMix64(seed).skipped(k);
            assert_eq!(skipped.0, drawn.0);
            assert_eq!(skipped.next_u64(), drawn.next_u64());
        }
        // far ahead the step count wraps: 2^64 draws bring the stream back
        assert_eq!(SplitMix64(9).skipped(u64::MAX).skipped(1).0, 9);
    }

    #[test]
    fn rem_by_is_the_remainder() {
        let mut r = SplitMix64(5);
        let mut divisors = vec![
            0,
            1,
            2,
            3,
            7,
            26_000,
            1 << 32,
            (1 << 32) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        divisors.extend((0..200).map(|k| r.next_u64() >> (k % 64)));
        for d in divisors {
            let by = RemBy::new(d);
            let dd = d.max(1);
            let mut xs = vec![0, 1, dd - 1, dd, dd.wrapping_add(1), u64::MAX, u64::MAX - 1];
            xs.extend(
                (1..4)
                    .map(|k| dd.wrapping_mul(k))
                    .flat_map(|x| [x, x.wrapping_sub(1)]),
            );
            xs.extend((0..2_000).map(|_| r.next_u64()));
            for x in xs {
                assert_eq!(by.rem(x), x % dd, "{x} % {dd}");
            }
        }
        // the same draws as below_mod
        let (mut a, mut b) = (SplitMix64(8), SplitMix64(8));
        let n = RemBy::new(26_000);
        for _ in 0..1_000 {
            assert_eq!(a.below_mod(26_000), b.below_mod_by(&n));
        }
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v: Vec<usize> = (0..100).collect();
        SplitMix64(3).shuffle(&mut v);
        let mut s = v.clone();
        s.sort_unstable();
        assert_eq!(s, (0..100).collect::<Vec<_>>());
        assert_ne!(v, s);
    }
}

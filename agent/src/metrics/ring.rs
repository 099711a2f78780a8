//! The history ring (8 h of 5 s samples) and the pure functions that answer
//! a `MetricsHistory` request from it: the inclusive time window and the
//! `max_points` bucketing.

use std::collections::VecDeque;

use super::sample::Sample;

/// How many samples the ring keeps: 8 h at one sample every 5 s.
pub(crate) const RING_CAPACITY: usize = 5_760;

/// The last [`RING_CAPACITY`] samples, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Ring {
    samples: VecDeque<Sample>,
}

impl Ring {
    /// Appends `sample`, dropping the oldest one when full.
    pub(crate) fn push(&mut self, sample: Sample) {
        if self.samples.len() >= RING_CAPACITY {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }

    /// How many samples the ring holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.samples.len()
    }

    /// The newest sample, if any (what telemetry export sends).
    pub(crate) fn latest(&self) -> Option<Sample> {
        self.samples.back().cloned()
    }

    /// The oldest sample's time (0 when empty).
    pub(crate) fn oldest_unix_ms(&self) -> i64 {
        self.samples.front().map_or(0, |s| s.timestamp_unix_ms)
    }

    /// The samples with `start <= timestamp <= end` (a bound of `None` is
    /// open), oldest first.
    pub(crate) fn window(&self, start: Option<i64>, end: Option<i64>) -> Vec<Sample> {
        self.samples
            .iter()
            .filter(|s| start.is_none_or(|st| s.timestamp_unix_ms >= st))
            .filter(|s| end.is_none_or(|en| s.timestamp_unix_ms <= en))
            .cloned()
            .collect()
    }
}

/// Reduces `samples` to at most `max_points`: the series is split into
/// `max_points` segments of (nearly) equal counts, and each segment becomes
/// its last sample carrying the segment's mean CPU. A series no longer than
/// `max_points` (or `max_points == 0`, "no reduction") is returned as is.
pub(crate) fn bucket(samples: Vec<Sample>, max_points: usize) -> Vec<Sample> {
    let n = samples.len();
    if max_points == 0 || n <= max_points {
        return samples;
    }
    // Here max_points < n <= RING_CAPACITY, so `i * n` cannot overflow;
    // checked anyway, a segment bound past `n` is clamped.
    let bound = |i: usize| i.checked_mul(n).map_or(n, |p| p / max_points).min(n);
    let mut out = Vec::with_capacity(max_points);
    for i in 0..max_points {
        let (lo, hi) = (bound(i), bound(i + 1));
        let segment = &samples[lo..hi];
        let Some(last) = segment.last() else { continue };
        let sum: f64 = segment.iter().map(|s| s.cpu_used_pct).sum();
        let mut point = last.clone();
        point.cpu_used_pct = sum / segment.len() as f64;
        out.push(point);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(t: i64, cpu: f64) -> Sample {
        Sample {
            cpu_used_pct: cpu,
            timestamp_unix_ms: t,
            cpu_count: 1,
            ..Sample::default()
        }
    }

    #[test]
    fn the_ring_keeps_the_last_5760() {
        let mut ring = Ring::default();
        for t in 0..(RING_CAPACITY as i64 + 10) {
            ring.push(sample(t, 0.0));
        }
        assert_eq!(ring.len(), RING_CAPACITY);
        assert_eq!(ring.oldest_unix_ms(), 10);
        let all = ring.window(None, None);
        assert_eq!(all.first().unwrap().timestamp_unix_ms, 10);
        assert_eq!(
            all.last().unwrap().timestamp_unix_ms,
            RING_CAPACITY as i64 + 9
        );
    }

    #[test]
    fn bounds_are_inclusive() {
        let mut ring = Ring::default();
        for t in [1000, 2000, 3000, 4000] {
            ring.push(sample(t, 0.0));
        }
        let got: Vec<i64> = ring
            .window(Some(2000), Some(3000))
            .iter()
            .map(|s| s.timestamp_unix_ms)
            .collect();
        assert_eq!(got, vec![2000, 3000]);
        assert_eq!(ring.window(Some(4001), None).len(), 0);
        assert_eq!(ring.window(None, Some(1000)).len(), 1);
    }

    #[test]
    fn bucketing_takes_the_last_sample_and_the_mean_cpu() {
        let samples: Vec<Sample> = (0..6).map(|t| sample(t, t as f64 * 10.0)).collect();
        let got = bucket(samples, 2);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].timestamp_unix_ms, 2);
        assert!((got[0].cpu_used_pct - 10.0).abs() < 1e-9);
        assert_eq!(got[1].timestamp_unix_ms, 5);
        assert!((got[1].cpu_used_pct - 40.0).abs() < 1e-9);
    }

    proptest! {
        #[test]
        fn bucketing_properties(
            cpus in proptest::collection::vec(0.0f64..100.0, 0..400),
            max_points in 0usize..500,
        ) {
            let samples: Vec<Sample> = cpus
                .iter()
                .enumerate()
                .map(|(i, c)| sample(i as i64 * 5000, *c))
                .collect();
            let n = samples.len();
            let got = bucket(samples.clone(), max_points);
            if max_points == 0 || n <= max_points {
                prop_assert_eq!(got, samples);
            } else {
                // Exactly max_points points, ascending, the last one kept.
                prop_assert_eq!(got.len(), max_points);
                prop_assert!(got.windows(2).all(|w| w[0].timestamp_unix_ms < w[1].timestamp_unix_ms));
                prop_assert_eq!(got.last().unwrap().timestamp_unix_ms, samples[n - 1].timestamp_unix_ms);
                // The mean of the points weighted by segment size is the
                // series' mean; each point lies in the samples' CPU range.
                for p in &got {
                    prop_assert!((0.0..=100.0).contains(&p.cpu_used_pct));
                }
                let total: f64 = cpus.iter().sum();
                let mut weighted = 0.0;
                let mut prev = 0usize;
                for p in &got {
                    let idx = (p.timestamp_unix_ms / 5000) as usize + 1;
                    weighted += p.cpu_used_pct * (idx - prev) as f64;
                    prev = idx;
                }
                prop_assert!((weighted - total).abs() < 1e-6 * (1.0 + total));
            }
        }
    }
}

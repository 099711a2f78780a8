//! `HealthService.Metrics` and `MetricsHistory`: a snapshot (CPU from two
//! readings 100 ms apart) and the history a background sampler keeps (one
//! sample per interval, 5 s by default, in an 8 h ring; none while the
//! sandbox is suspended, which leaves a gap).

mod ring;
mod sample;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::Status;

use crate::pb;
use crate::run::RunState;
use crate::sandbox::SandboxEnv;
use ring::Ring;
pub(crate) use sample::Sample;
use sample::{CpuMark, Sources};

/// The history sampler's default interval.
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(5);

/// How far apart the snapshot's two CPU readings are.
const SNAPSHOT_CPU_WINDOW: Duration = Duration::from_millis(100);

/// The refusals of a `MetricsHistory` request (INVALID_ARGUMENT).
pub mod msg {
    /// `start_unix_ms` before 1970.
    pub const START_BEFORE_1970: &str = "start_unix_ms must not be before 1970";
    /// `end_unix_ms` before 1970.
    pub const END_BEFORE_1970: &str = "end_unix_ms must not be before 1970";
    /// Both bounds set and `start` after `end`.
    pub const START_AFTER_END: &str = "start_unix_ms must not be after end_unix_ms";
}

/// The metrics of one agent: where they are read and the history ring.
#[derive(Debug)]
pub(crate) struct Metrics {
    sources: Sources,
    ring: Mutex<Ring>,
}

impl Metrics {
    /// Metrics of the sandbox of `env`.
    pub(crate) fn new(env: &SandboxEnv) -> Self {
        Self {
            sources: Sources {
                cgroup: env.cgroup_dir(),
                root: env.root().to_path_buf(),
            },
            ring: Mutex::new(Ring::default()),
        }
    }

    /// `Metrics`: reads now, CPU over the next 100 ms.
    pub(crate) async fn snapshot(&self) -> pb::MetricsResponse {
        self.fresh().await.into()
    }

    /// A sample taken now, CPU over the next 100 ms.
    async fn fresh(&self) -> Sample {
        let first = sample::cpu_mark(&self.sources);
        tokio::time::sleep(SNAPSHOT_CPU_WINDOW).await;
        let second = sample::cpu_mark(&self.sources);
        let cpu = match (first, second) {
            (Some(a), Some(b)) => sample::cpu_between(a, b, sample::cpu_count()),
            _ => 0.0,
        };
        sample::sample_with_cpu(&self.sources, cpu)
    }

    /// The history's newest sample, else (nothing sampled yet) one taken
    /// now as [`Self::snapshot`] does: what each telemetry export sends.
    pub(crate) async fn latest(&self) -> Sample {
        let newest = self.ring.lock().unwrap_or_else(|p| p.into_inner()).latest();
        match newest {
            Some(sample) => sample,
            None => self.fresh().await,
        }
    }

    /// `MetricsHistory`: the ring's samples in the request's window,
    /// reduced to `max_points` (0: all).
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a bound before 1970 or `start` after `end`.
    pub(crate) fn history(
        &self,
        request: &pb::MetricsHistoryRequest,
    ) -> Result<pb::MetricsHistoryResponse, Status> {
        let (start, end) = window(request)?;
        let (samples, oldest) = {
            let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
            (ring.window(start, end), ring.oldest_unix_ms())
        };
        // u32 -> usize never truncates on our targets; a larger value than
        // the ring holds just means "no reduction".
        let max_points = usize::try_from(request.max_points).unwrap_or(usize::MAX);
        Ok(pb::MetricsHistoryResponse {
            samples: ring::bucket(samples, max_points)
                .into_iter()
                .map(Into::into)
                .collect(),
            oldest_unix_ms: oldest,
        })
    }

    /// Samples every `interval` until the task is aborted (the agent's
    /// drop); skips the ticks while `shared` is suspended, and measures the
    /// first CPU after one over a fresh 100 ms window rather than across
    /// the suspension.
    pub(crate) async fn run_sampler(self: Arc<Self>, run: Arc<RunState>, interval: Duration) {
        let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut previous: Option<CpuMark> = sample::cpu_mark(&self.sources);
        // The first tick is immediate: the baseline was just taken.
        ticker.tick().await;
        loop {
            ticker.tick().await;
            if run.suspended.load(std::sync::atomic::Ordering::SeqCst) {
                previous = None;
                continue;
            }
            let start = match previous {
                Some(mark) => Some(mark),
                None => {
                    let mark = sample::cpu_mark(&self.sources);
                    tokio::time::sleep(SNAPSHOT_CPU_WINDOW).await;
                    mark
                }
            };
            let now = sample::cpu_mark(&self.sources);
            let cpu = match (start, now) {
                (Some(a), Some(b)) => sample::cpu_between(a, b, sample::cpu_count()),
                _ => 0.0,
            };
            previous = now;
            let taken = sample::sample_with_cpu(&self.sources, cpu);
            self.ring
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(taken);
        }
    }
}

/// The request's bounds (0 is unbounded), checked.
fn window(request: &pb::MetricsHistoryRequest) -> Result<(Option<i64>, Option<i64>), Status> {
    if request.start_unix_ms < 0 {
        return Err(Status::invalid_argument(msg::START_BEFORE_1970));
    }
    if request.end_unix_ms < 0 {
        return Err(Status::invalid_argument(msg::END_BEFORE_1970));
    }
    let start = (request.start_unix_ms > 0).then_some(request.start_unix_ms);
    let end = (request.end_unix_ms > 0).then_some(request.end_unix_ms);
    if let (Some(s), Some(e)) = (start, end)
        && s > e
    {
        return Err(Status::invalid_argument(msg::START_AFTER_END));
    }
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(start: i64, end: i64) -> pb::MetricsHistoryRequest {
        pb::MetricsHistoryRequest {
            start_unix_ms: start,
            end_unix_ms: end,
            max_points: 0,
        }
    }

    #[test]
    fn the_window_refuses_what_the_contract_refuses() {
        assert_eq!(window(&req(0, 0)).unwrap(), (None, None));
        assert_eq!(window(&req(5, 5)).unwrap(), (Some(5), Some(5)));
        assert_eq!(window(&req(7, 0)).unwrap(), (Some(7), None));
        let e = window(&req(-1, 0)).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert_eq!(e.message(), msg::START_BEFORE_1970);
        assert_eq!(
            window(&req(0, -1)).unwrap_err().message(),
            msg::END_BEFORE_1970
        );
        assert_eq!(
            window(&req(6, 5)).unwrap_err().message(),
            msg::START_AFTER_END
        );
    }
}

//! Finding a sandbox's processes by the marker in their environment, where
//! the sandbox has no cgroup: every child starts with
//! `RAYITO_SANDBOX=<marker>`, which its own children inherit wherever they
//! move (another session, another process group, reparented to init).
//!
//! A scan of `/proc` cannot read the environment of a process that is in
//! the middle of an `execve`: between the switch to its new memory and the
//! kernel's copy of the new environment onto its stack, `environ` reads
//! empty (and `stat` shows `env_end` 0). Under load a process can stay in
//! that window for longer than a pause between two scans (a CI run left an
//! escaped `setsid sleep` alive that way: it was exec'ing `sleep` during
//! both passes of the kill, which then stopped because its second pass
//! found nothing). Such a process is therefore looked at again, by itself,
//! until its environment shows (or it is gone), before a scan counts as
//! having found nothing.

use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

/// How many full scans the kill makes at most.
const PASSES: usize = 5;
/// The pause between two full scans: long enough for a fork in flight to
/// finish (its child then shows the marker it copied).
const PASS_PAUSE: Duration = Duration::from_millis(5);
/// How long the kill waits, in all, for processes caught mid-exec to show
/// an environment (an exec normally takes well under a millisecond of CPU;
/// this is for a loaded host that leaves one waiting for the CPU).
const IN_FLIGHT_LIMIT: Duration = Duration::from_millis(500);
/// The pause between two looks at a process caught mid-exec.
const IN_FLIGHT_PAUSE: Duration = Duration::from_millis(1);

/// `PF_KTHREAD` in the flags of `/proc/<pid>/stat`: a kernel thread, which
/// has no environment at all.
const PF_KTHREAD: u64 = 0x0020_0000;

/// What a look at one process tells.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// Its environment carries the marker.
    Marked,
    /// Its environment cannot be read yet: it is mid-exec.
    InFlight,
    /// Not the sandbox's (another environment, a kernel thread, a zombie,
    /// gone, or not readable by the agent, whose own processes always are).
    Other,
}

/// `RAYITO_SANDBOX=<marker>`, as it appears in an environment.
pub(crate) struct Needle(Vec<u8>);

impl Needle {
    pub(crate) fn new(marker: &str) -> Self {
        Self(format!("{}={marker}", crate::sandbox::SANDBOX_MARKER).into_bytes())
    }

    fn look(&self, pid: i32) -> Seen {
        match std::fs::read(format!("/proc/{pid}/environ")) {
            Ok(env) if env.split(|b| *b == 0).any(|kv| kv == self.0) => Seen::Marked,
            Ok(env) if env.is_empty() => in_flight(pid),
            _ => Seen::Other,
        }
    }

    /// Pids whose environment carries the marker now.
    pub(crate) fn marked_pids(&self) -> Vec<i32> {
        self.scan().0
    }

    /// One scan of `/proc`: the marked pids and those caught mid-exec.
    fn scan(&self) -> (Vec<i32>, Vec<i32>) {
        let mut marked = Vec::new();
        let mut in_flight = Vec::new();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return (marked, in_flight);
        };
        for pid in dir
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        {
            match self.look(pid) {
                Seen::Marked => marked.push(pid),
                Seen::InFlight => in_flight.push(pid),
                Seen::Other => {}
            }
        }
        (marked, in_flight)
    }

    /// SIGKILLs every process carrying the marker: full scans until one
    /// after the first finds none (a process that forked between a scan and
    /// its kill shows up in the next), each followed by looks at the
    /// processes it caught mid-exec until they show their environment.
    pub(crate) fn kill_marked(&self) {
        let give_up = Instant::now() + IN_FLIGHT_LIMIT;
        for pass in 0..PASSES {
            let (marked, mut in_flight) = self.scan();
            let mut found = marked.len();
            kill(&marked);
            while !in_flight.is_empty() && Instant::now() < give_up {
                std::thread::sleep(IN_FLIGHT_PAUSE);
                in_flight.retain(|&pid| match self.look(pid) {
                    Seen::Marked => {
                        found += 1;
                        kill(&[pid]);
                        false
                    }
                    Seen::InFlight => true,
                    Seen::Other => false,
                });
            }
            if found == 0 && pass > 0 {
                break;
            }
            if pass + 1 < PASSES {
                std::thread::sleep(PASS_PAUSE);
            }
        }
    }
}

fn kill(pids: &[i32]) {
    for pid in pids.iter().copied().filter_map(Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, Signal::KILL);
    }
}

/// Whether `pid`, whose environment read empty, is mid-exec: a live user
/// process whose memory has no environment yet (`env_end` 0 in its
/// `stat`), rather than a kernel thread, a zombie, or a process started
/// with an empty environment.
fn in_flight(pid: i32) -> Seen {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Seen::Other;
    };
    // The fields after the parenthesised command name, from the state
    // (field 3) on; the flags are field 9, env_end field 51.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return Seen::Other;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).copied();
    let kernel_thread = field(9)
        .and_then(|f| f.parse::<u64>().ok())
        .is_none_or(|flags| flags & PF_KTHREAD != 0);
    if kernel_thread || matches!(field(3), Some("Z" | "X" | "x")) {
        return Seen::Other;
    }
    match field(51) {
        Some("0") => Seen::InFlight,
        _ => Seen::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_with_an_empty_environment_is_not_in_flight() {
        let child = std::process::Command::new("sleep")
            .arg("5")
            .env_clear()
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Until its exec completed, it may well be in flight.
        let deadline = Instant::now() + Duration::from_secs(5);
        while in_flight(pid) == Seen::InFlight && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(in_flight(pid), Seen::Other);
        let needle = Needle::new("0123");
        assert_eq!(needle.look(pid), Seen::Other);
        let mut child = child;
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn kernel_threads_and_this_process_are_not_in_flight() {
        // kthreadd.
        assert_eq!(in_flight(2), Seen::Other);
        assert_eq!(in_flight(std::process::id() as i32), Seen::Other);
    }
}

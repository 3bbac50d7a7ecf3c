//! Where the CPU goes: the CPU seconds of the processes sharing the machine's cores (the
//! hub, the controller, this harness with its simulated agent), sampled every 100 ms, so
//! that any window measured afterwards (a bare update, an abort) can be split by process.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The processes whose CPU is split out.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    /// The test hub (kube-apiserver with its etcd, and the controller-manager it runs).
    Hub,
    /// The controller under test (its pid changes when it restarts).
    Controller,
    /// This process: the bare client, the tracker's watch, the simulated agent.
    Harness,
}

const ROLES: usize = 3;
const EVERY: Duration = Duration::from_millis(100);

/// CPU seconds of each role in a window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Split {
    pub hub: f64,
    pub controller: f64,
    pub harness: f64,
}

impl Split {
    pub fn total(&self) -> f64 {
        self.hub + self.controller + self.harness
    }

    /// `hub 4.1 s, controller 0.8 s, harness 1.2 s (1.53 cores busy)` over `wall` seconds.
    pub fn text(&self, wall: f64) -> String {
        format!(
            "hub {:.2} s, controller {:.2} s, harness {:.2} s ({:.2} cores busy)",
            self.hub,
            self.controller,
            self.harness,
            self.total() / wall.max(f64::EPSILON)
        )
    }
}

#[derive(Default)]
struct State {
    pids: [Option<u32>; ROLES],
    /// Per role, CPU seconds of the processes it had before its current one.
    carried: [f64; ROLES],
    /// Per role, the last reading of its current process.
    last: [f64; ROLES],
    samples: Vec<(Instant, [f64; ROLES])>,
}

/// Samples in the background until dropped.
pub struct Sampler {
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sampler {
    /// Starts sampling the hub (`hub_pid` and its children, when given) and this process.
    pub fn start(hub_pid: Option<u32>, tck: f64) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        if let Ok(mut s) = state.lock() {
            s.pids[Role::Hub as usize] = hub_pid;
            s.pids[Role::Harness as usize] = Some(std::process::id());
        }
        let st = state.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(EVERY);
            loop {
                tick.tick().await;
                let Ok(mut s) = st.lock() else { return };
                s.sample(tck);
            }
        });
        Self { state, task }
    }

    /// From now on `role` is process `pid` (and its children).
    pub fn follow(&self, role: Role, pid: u32) {
        if let Ok(mut s) = self.state.lock() {
            let i = role as usize;
            if s.pids[i] != Some(pid) {
                s.carried[i] += s.last[i];
                s.last[i] = 0.0;
                s.pids[i] = Some(pid);
            }
        }
    }

    /// CPU seconds of each role between `from` and `to` (interpolated between samples).
    pub fn between(&self, from: Instant, to: Instant) -> Split {
        let Ok(s) = self.state.lock() else {
            return Split::default();
        };
        let (a, b) = (at(&s.samples, from), at(&s.samples, to));
        let used = |role: Role| b[role as usize] - a[role as usize];
        Split {
            hub: used(Role::Hub),
            controller: used(Role::Controller),
            harness: used(Role::Harness),
        }
    }
}

impl State {
    fn sample(&mut self, tck: f64) {
        let mut now = [0.0; ROLES];
        for (i, total) in now.iter_mut().enumerate() {
            if let Some(pid) = self.pids[i] {
                // A process that has exited keeps its last reading.
                if let Some(secs) = tree_cpu_secs(pid, tck) {
                    self.last[i] = secs;
                }
            }
            *total = self.carried[i] + self.last[i];
        }
        self.samples.push((Instant::now(), now));
    }
}

/// The cumulative readings at `t`, interpolated linearly between the samples around it.
fn at(samples: &[(Instant, [f64; ROLES])], t: Instant) -> [f64; ROLES] {
    let i = samples.partition_point(|(when, _)| *when <= t);
    match (
        i.checked_sub(1).and_then(|j| samples.get(j)),
        samples.get(i),
    ) {
        (Some((t0, a)), Some((t1, b))) => {
            let span = t1.duration_since(*t0).as_secs_f64();
            let f = if span > 0.0 {
                t.duration_since(*t0).as_secs_f64() / span
            } else {
                0.0
            };
            std::array::from_fn(|k| a[k] + (b[k] - a[k]) * f)
        }
        (Some((_, a)), None) => *a,
        (None, Some((_, b))) => *b,
        (None, None) => [0.0; ROLES],
    }
}

/// `pid` and its descendants.
pub fn tree(root: u32) -> Vec<u32> {
    let mut all = vec![root];
    let mut i = 0;
    while i < all.len() {
        let p = all[i];
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")) {
            all.extend(s.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
        }
        i += 1;
    }
    all
}

/// The fields of a `/proc/<pid>/stat` line after the command's name, from the state on:
/// they start after its last ')' (the name itself may hold spaces and parentheses).
pub fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().collect())
}

/// CPU seconds (user + system) of one process, None when it is gone.
pub fn cpu_secs(pid: u32, tck: f64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f = stat_fields(&stat)?;
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    Some((ticks(11) + ticks(12)) / tck)
}

/// CPU seconds of `root` and its descendants, None when `root` is gone.
pub fn tree_cpu_secs(root: u32, tck: f64) -> Option<f64> {
    let own = cpu_secs(root, tck)?;
    let children: f64 = tree(root)
        .into_iter()
        .skip(1)
        .filter_map(|p| cpu_secs(p, tck))
        .sum();
    Some(own + children)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_between_samples_are_interpolated() {
        let t0 = Instant::now();
        let s = |ms: u64, v: f64| (t0 + Duration::from_millis(ms), [v, 2.0 * v, 0.0]);
        let samples = vec![s(0, 0.0), s(100, 1.0), s(200, 3.0)];
        let mid = at(&samples, t0 + Duration::from_millis(150));
        assert!((mid[0] - 2.0).abs() < 1e-9, "{mid:?}");
        assert!((mid[1] - 4.0).abs() < 1e-9, "{mid:?}");
        assert_eq!(at(&samples, t0 + Duration::from_millis(500))[0], 3.0);
        assert_eq!(at(&[], t0), [0.0; ROLES]);
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        let me = std::process::id();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut x = 0u64;
        // The kernel counts in clock ticks: spin until one is counted.
        while tree_cpu_secs(me, 100.0).is_some_and(|s| s == 0.0) && Instant::now() < deadline {
            for i in 0..100_000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
        }
        assert!(tree_cpu_secs(me, 100.0).is_some_and(|s| s > 0.0));
        assert_eq!(tree_cpu_secs(u32::MAX, 100.0), None);
    }
}

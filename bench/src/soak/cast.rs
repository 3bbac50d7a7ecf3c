//! The processes a soak runs and breaks: two controller replicas with leader election
//! (restarted when they exit, as a kubelet would), the reference rollout plugin, the
//! simulated fleet's agents (one per decision group, in this process) and the test hub.
//! A fault is injected, held for its time and healed here; the supervision goes on
//! meanwhile.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams};
use kube::{Client, ResourceExt};
use mwrs_api::labels;
use mwrs_api::placement::PlacementDecision;
use mwrs_fleet::agent::BehaviourFn;
use mwrs_fleet::placement::{self, DecisionGroup};
use mwrs_fleet::{Agent, AgentConfig, AgentHandle};

use super::rng::Rng;
use crate::process::Proc;

/// Every kind of fault the soak injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// SIGKILL of the replica holding the Lease; restarted 1–5 s later.
    KillLeader,
    /// SIGKILL of the other replica.
    KillStandby,
    /// SIGSTOP of the leader for 5–30 s (past the Lease's 15 s at times), then SIGCONT.
    FreezeLeader,
    FreezeStandby,
    /// SIGSTOP of the test hub (API server and etcd) for 2–10 s.
    HubStall,
    /// SIGKILL of the test hub, started again on its data (`scripts/hub.sh
    /// crash-restart`): every watch breaks, every client relists.
    HubRestart,
    /// etcd paused behind a running API server for 2–10 s (testhub's `--pausable-etcd`):
    /// reads from its watch cache go on, writes time out.
    EtcdPause,
    /// A decision group's agents stop and come back 1–5 s later (a relist).
    AgentsCrash,
    /// A decision group's agents report nothing for 10–40 s (within the progress deadline).
    AgentsSilent,
    /// One PlacementDecision page deleted and written again 2–10 s later, the Placement
    /// still counting every cluster: the decisions are incomplete meanwhile, and nothing
    /// may be deleted for it (rules §11.5).
    DecisionsRepaged,
    /// The plugin killed and back 5–30 s later.
    PluginDown,
    /// The plugin frozen 5–20 s: calls hang until the controller's timeout.
    PluginSlow,
    /// For 10–30 s the plugin may not read the ManifestWorks of one decision group: it
    /// answers errors for those clusters only.
    PluginErring,
    /// For 20–40 s, the plugin goes down and comes back every few seconds.
    PluginFlapping,
    /// The leader killed once the standby has been up longer than the plugin's
    /// `unavailableFor`, as a `helm upgrade` or a node drain does: the new leader must
    /// not count the plugin down since its own start (rules §12.6). Not a plugin fault:
    /// the judged rollout must end as it would have.
    PluginFailover,
    /// For 10–40 s every call about a cluster answers UNAVAILABLE while Initialize still
    /// answers (the plugin's own backend down), through the plugin's front ([`super::front`]).
    PluginBackendDown,
    /// A new key written into the mark key's Secret: the replicas take it within their
    /// re-read, and what was sealed with the previous one stays believed.
    MarkKeyRotated,
}

impl Fault {
    pub const ALL: [Fault; 17] = [
        Fault::KillLeader,
        Fault::KillStandby,
        Fault::FreezeLeader,
        Fault::FreezeStandby,
        Fault::HubStall,
        Fault::HubRestart,
        Fault::EtcdPause,
        Fault::AgentsCrash,
        Fault::AgentsSilent,
        Fault::DecisionsRepaged,
        Fault::PluginDown,
        Fault::PluginSlow,
        Fault::PluginErring,
        Fault::PluginFlapping,
        Fault::PluginFailover,
        Fault::PluginBackendDown,
        Fault::MarkKeyRotated,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Fault::KillLeader => "leader killed",
            Fault::KillStandby => "standby killed",
            Fault::FreezeLeader => "leader frozen",
            Fault::FreezeStandby => "standby frozen",
            Fault::HubStall => "hub stalled",
            Fault::HubRestart => "hub restarted",
            Fault::EtcdPause => "etcd paused",
            Fault::AgentsCrash => "decision group's agents crashed",
            Fault::AgentsSilent => "decision group's agents silent",
            Fault::DecisionsRepaged => "decision page gone a while",
            Fault::PluginDown => "plugin down",
            Fault::PluginSlow => "plugin slow",
            Fault::PluginErring => "plugin erring on a group",
            Fault::PluginFlapping => "plugin flapping",
            Fault::PluginFailover => "failover past unavailableFor",
            Fault::PluginBackendDown => "plugin backend down",
            Fault::MarkKeyRotated => "mark key rotated",
        }
    }

    /// A fault of the plugin: the rollouts it judges may fail by its failure budget.
    pub fn is_plugin(&self) -> bool {
        matches!(
            self,
            Fault::PluginDown
                | Fault::PluginSlow
                | Fault::PluginErring
                | Fault::PluginFlapping
                | Fault::PluginBackendDown
        )
    }
}

/// How to start a process again.
pub struct Launch {
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub logs: PathBuf,
}

impl Launch {
    /// Starts it once more (its `n`th start). Its host name is its name, so a controller
    /// replica's Lease identity (`HOST-PID`) names the replica whatever its process id.
    fn spawn(&self, n: u32) -> anyhow::Result<Proc> {
        let log = self.logs.join(format!("{}.{n}.log", self.name));
        let env = [("HOSTNAME", self.name.as_str())];
        Proc::spawn_with(&self.name, &self.program, &self.args, &env, &log)
    }
}

/// A process the soak keeps running: started again when it exits, unless held down.
pub struct Kept {
    pub launch: Launch,
    pub proc: Option<Proc>,
    pub starts: u32,
    down_until: Option<Instant>,
    /// When the running process was started.
    pub since: Instant,
}

impl Kept {
    pub fn start(launch: Launch) -> anyhow::Result<Self> {
        let proc = launch.spawn(0)?;
        Ok(Self {
            launch,
            proc: Some(proc),
            starts: 1,
            down_until: None,
            since: Instant::now(),
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().and_then(|p| p.pid().ok())
    }

    /// Starts it again if it has exited and may run; returns the new pid.
    fn tend(&mut self) -> anyhow::Result<Option<u32>> {
        let exited = match &mut self.proc {
            Some(p) => p.child.try_wait()?.is_some(),
            None => true,
        };
        let held = self.down_until.is_some_and(|t| Instant::now() < t);
        if !exited || held {
            return Ok(None);
        }
        self.down_until = None;
        let proc = self.launch.spawn(self.starts)?;
        self.starts += 1;
        self.since = Instant::now();
        let pid = proc.pid().ok();
        self.proc = Some(proc);
        Ok(pid)
    }

    /// SIGKILL, and no restart before `down` has passed.
    fn kill(&mut self, down: Duration) {
        if let Some(pid) = self.pid() {
            signal(pid, "-KILL");
        }
        self.down_until = Some(Instant::now() + down);
    }
}

pub fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status();
}

/// Everything the soak runs.
pub struct Cast {
    pub client: Client,
    pub namespace: String,
    pub replicas: Vec<Kept>,
    pub plugin: Kept,
    pub groups: Vec<Vec<String>>,
    agents: Vec<Option<AgentHandle>>,
    behaviour: BehaviourFn,
    pub hub_pid: Option<u32>,
    /// Replica starts after the first (exits after a lost lease, kills).
    pub restarts: u32,
    /// The plugin's front's switch ([`Fault::PluginBackendDown`]).
    pub backend: super::front::BackendDown,
}

impl Cast {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Client,
        namespace: &str,
        replicas: Vec<Kept>,
        plugin: Kept,
        groups: Vec<Vec<String>>,
        behaviour: BehaviourFn,
        hub_pid: Option<u32>,
    ) -> Self {
        let mut cast = Self {
            client,
            namespace: namespace.to_string(),
            replicas,
            plugin,
            agents: Vec::new(),
            groups,
            behaviour,
            hub_pid,
            restarts: 0,
            backend: super::front::BackendDown::default(),
        };
        cast.agents = (0..cast.groups.len())
            .map(|g| Some(cast.agent(g)))
            .collect();
        cast
    }

    fn agent(&self, group: usize) -> AgentHandle {
        let mut config = AgentConfig::new(self.groups[group].iter().cloned());
        config.behaviour = self.behaviour.clone();
        Agent::start(self.client.clone(), config)
    }

    /// Restarts what exited; called every half second while the soak runs.
    pub fn tend(&mut self) -> anyhow::Result<()> {
        for r in &mut self.replicas {
            if r.tend()?.is_some() {
                self.restarts += 1;
            }
        }
        self.plugin.tend()?;
        Ok(())
    }

    /// Tends for `d`.
    pub async fn tend_for(&mut self, d: Duration) -> anyhow::Result<()> {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.tend()?;
            tokio::time::sleep(Duration::from_millis(500).min(until - Instant::now())).await;
        }
        self.tend()
    }

    /// The index of the replica the Lease names (None: none of ours, or no Lease).
    pub async fn leader(&self) -> Option<usize> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.namespace);
        let lease = api.get_opt(super::LEASE).await.ok().flatten()?;
        let holder = lease.spec?.holder_identity?;
        let pid: u32 = holder.rsplit_once('-')?.1.parse().ok()?;
        self.replicas.iter().position(|r| r.pid() == Some(pid))
    }

    /// Injects `fault` with `rng`'s draws, holds it, heals it; returns what it hit.
    pub async fn inject(&mut self, fault: Fault, rng: &mut Rng) -> anyhow::Result<String> {
        let leader = self.leader().await;
        let standby = leader.map(|l| 1 - l);
        match fault {
            Fault::KillLeader => self.kill_replica(leader, rng).await,
            Fault::KillStandby => self.kill_replica(standby, rng).await,
            Fault::FreezeLeader => self.freeze_replica(leader, rng).await,
            Fault::FreezeStandby => self.freeze_replica(standby, rng).await,
            Fault::HubStall => self.stall_hub(rng).await,
            Fault::HubRestart => self.restart_hub().await,
            Fault::EtcdPause => self.pause_etcd(rng).await,
            Fault::AgentsCrash | Fault::AgentsSilent => self.agents_away(fault, rng).await,
            Fault::DecisionsRepaged => self.repage(rng).await,
            Fault::PluginDown => {
                let down = rng.secs(5.0, 30.0);
                self.plugin.kill(down);
                self.tend_for(down + Duration::from_secs(1)).await?;
                Ok(format!("for {down:.0?}"))
            }
            Fault::PluginSlow => self.slow_plugin(rng).await,
            Fault::PluginErring => self.plugin_erring(rng).await,
            Fault::PluginFailover => self.failover(rng).await,
            Fault::PluginBackendDown => self.backend_down(rng).await,
            Fault::MarkKeyRotated => self.rotate_mark_key(rng).await,
            Fault::PluginFlapping => self.flap_plugin(rng).await,
        }
    }

    /// Kills replica `i` (None: no replica holds the Lease), restarted 1–5 s later.
    async fn kill_replica(&mut self, i: Option<usize>, rng: &mut Rng) -> anyhow::Result<String> {
        let Some(i) = i else {
            return Ok("no replica holds the lease".into());
        };
        self.replicas[i].kill(rng.secs(1.0, 5.0));
        self.tend_for(Duration::from_secs(6)).await?;
        Ok(self.replicas[i].launch.name.clone())
    }

    /// Freezes replica `i` (None: no replica holds the Lease) for 5–30 s.
    async fn freeze_replica(&mut self, i: Option<usize>, rng: &mut Rng) -> anyhow::Result<String> {
        let Some((i, pid)) = i.and_then(|i| Some((i, self.replicas[i].pid()?))) else {
            return Ok("no replica holds the lease".into());
        };
        signal(pid, "-STOP");
        let held = self.frozen(pid, rng.secs(5.0, 30.0)).await;
        Ok(format!("{} for {held:.0?}", self.replicas[i].launch.name))
    }

    /// Freezes the test hub for 2–10 s.
    async fn stall_hub(&mut self, rng: &mut Rng) -> anyhow::Result<String> {
        let Some(pid) = self.hub_pid else {
            return Ok("no hub process known (--hub-pid)".into());
        };
        signal(pid, "-STOP");
        let held = self.frozen(pid, rng.secs(2.0, 10.0)).await;
        Ok(format!("for {held:.0?}"))
    }

    /// Pauses etcd behind the running API server for 2–10 s.
    async fn pause_etcd(&mut self, rng: &mut Rng) -> anyhow::Result<String> {
        let Some(pid) = self.hub_pid else {
            return Ok("no hub process known (--hub-pid)".into());
        };
        signal(pid, "-USR1");
        let held = rng.secs(2.0, 10.0);
        let r = self.tend_for(held).await;
        signal(pid, "-USR2");
        r?;
        Ok(format!("for {held:.0?}"))
    }

    /// Stops a decision group's agents, for 1–5 s ([`Fault::AgentsCrash`]) or 10–40 s
    /// ([`Fault::AgentsSilent`]), then starts them again.
    async fn agents_away(&mut self, fault: Fault, rng: &mut Rng) -> anyhow::Result<String> {
        let g = rng.below(self.groups.len());
        let away = match fault {
            Fault::AgentsCrash => rng.secs(1.0, 5.0),
            _ => rng.secs(10.0, 40.0),
        };
        if let Some(a) = self.agents[g].take() {
            a.stop();
        }
        self.tend_for(away).await?;
        self.agents[g] = Some(self.agent(g));
        Ok(format!("group {g} for {away:.0?}"))
    }

    /// Freezes the plugin for 5–20 s.
    async fn slow_plugin(&mut self, rng: &mut Rng) -> anyhow::Result<String> {
        let Some(pid) = self.plugin.pid() else {
            return Ok("the plugin is not running".into());
        };
        signal(pid, "-STOP");
        let held = self.frozen(pid, rng.secs(5.0, 20.0)).await;
        Ok(format!("for {held:.0?}"))
    }

    /// Takes from the plugin the reading of one decision group's ManifestWorks for
    /// 10–30 s.
    async fn plugin_erring(&mut self, rng: &mut Rng) -> anyhow::Result<String> {
        let g = rng.below(self.groups.len());
        let held = rng.secs(10.0, 30.0);
        super::access::revoke_plugin(&self.client, &self.groups[g]).await?;
        let r = self.tend_for(held).await;
        super::access::grant_plugin(&self.client, &self.groups[g]).await?;
        r?;
        Ok(format!("group {g} for {held:.0?}"))
    }

    /// Turns the plugin's backend down behind its front for 10–40 s.
    async fn backend_down(&mut self, rng: &mut Rng) -> anyhow::Result<String> {
        let held = rng.secs(10.0, 40.0);
        self.backend.set(true);
        let r = self.tend_for(held).await;
        self.backend.set(false);
        r?;
        Ok(format!("for {held:.0?}"))
    }

    /// For 20–40 s, kills the plugin for 1–3 s and lets it run 2–5 s, in turn.
    async fn flap_plugin(&mut self, rng: &mut Rng) -> anyhow::Result<String> {
        let until = Instant::now() + rng.secs(20.0, 40.0);
        let mut flaps = 0;
        while Instant::now() < until {
            let down = rng.secs(1.0, 3.0);
            self.plugin.kill(down);
            self.tend_for(down + rng.secs(2.0, 5.0)).await?;
            flaps += 1;
        }
        Ok(format!("{flaps} times"))
    }

    /// Kills the leader once the standby has been up longer than the plugin's
    /// `unavailableFor` (waiting for that if need be).
    async fn failover(&mut self, rng: &mut Rng) -> anyhow::Result<String> {
        let past = super::PLUGIN_UNAVAILABLE_FOR + Duration::from_secs(2);
        let Some(standby) = self.leader().await.map(|l| 1 - l) else {
            return Ok("no replica holds the lease".into());
        };
        let up = self.replicas[standby].since.elapsed();
        if up < past {
            self.tend_for(past - up).await?;
        }
        let Some(leader) = self.leader().await else {
            return Ok("no replica holds the lease".into());
        };
        let up = self.replicas[1 - leader].since.elapsed();
        self.replicas[leader].kill(rng.secs(1.0, 5.0));
        self.tend_for(Duration::from_secs(6)).await?;
        Ok(format!(
            "{}, the standby up {up:.0?}",
            self.replicas[leader].launch.name
        ))
    }

    /// Writes 32 new bytes into the mark key's Secret.
    async fn rotate_mark_key(&mut self, rng: &mut Rng) -> anyhow::Result<String> {
        use k8s_openapi::ByteString;
        use k8s_openapi::api::core::v1::Secret;
        use kube::api::{Patch, PatchParams};
        let key: Vec<u8> = (0..32).map(|_| rng.below(256) as u8).collect();
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let patch = serde_json::json!({"data": {"key": ByteString(key)}});
        match secrets
            .patch(
                super::MARK_KEY_SECRET,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(format!("{}/{}", self.namespace, super::MARK_KEY_SECRET)),
            Err(e) => Ok(format!("not rotated: {e}")),
        }
    }

    /// Deletes one page of the placement's decisions, and publishes them all again after
    /// a while.
    async fn repage(&mut self, rng: &mut Rng) -> anyhow::Result<String> {
        let pages: Api<PlacementDecision> = Api::namespaced(self.client.clone(), &self.namespace);
        let selector = format!("{}={}", labels::PLACEMENT_LABEL, super::PLACEMENT);
        let names: Vec<String> = pages
            .list_metadata(&ListParams::default().labels(&selector))
            .await?
            .into_iter()
            .map(|p| p.name_any())
            .collect();
        if names.is_empty() {
            return Ok("no decision page".into());
        }
        let page = rng.pick(&names).clone();
        pages.delete(&page, &DeleteParams::default()).await?;
        let gone = rng.secs(2.0, 10.0);
        self.tend_for(gone).await?;
        let groups: Vec<DecisionGroup> = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, c)| DecisionGroup::new(format!("g{i}"), c.clone()))
            .collect();
        placement::publish(&self.client, &self.namespace, super::PLACEMENT, &groups).await?;
        Ok(format!("{page} for {gone:.0?}"))
    }

    /// `scripts/hub.sh crash-restart` on the hub of `MWRS_HUB_DIR` (bench/soak/run.sh's).
    async fn restart_hub(&mut self) -> anyhow::Result<String> {
        let Some(dir) = std::env::var_os("MWRS_HUB_DIR").map(PathBuf::from) else {
            return Ok("no MWRS_HUB_DIR".into());
        };
        let t = Instant::now();
        let out = tokio::process::Command::new("scripts/hub.sh")
            .arg("crash-restart")
            .output()
            .await?;
        anyhow::ensure!(
            out.status.success(),
            "the hub did not come back: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.hub_pid = std::fs::read_to_string(dir.join("hub.pid"))?
            .trim()
            .parse()
            .ok();
        self.tend()?;
        Ok(format!("back in {:.1?}", t.elapsed()))
    }

    /// Holds `pid` stopped for `d` (tending the others), then continues it.
    async fn frozen(&mut self, pid: u32, d: Duration) -> Duration {
        let r = self.tend_for(d).await;
        signal(pid, "-CONT");
        if let Err(e) = r {
            eprintln!("soak: while {pid} was stopped: {e:#}");
        }
        d
    }

    /// Stops everything.
    pub async fn stop(self) {
        for a in self.agents.into_iter().flatten() {
            a.stop();
        }
        for k in self.replicas.into_iter().chain([self.plugin]) {
            if let Some(p) = k.proc {
                p.stop().await;
            }
        }
    }
}

//! Whether each plugin answers, as this replica's own calls found it: `Initialize` at
//! start and on every poll, and every call's outcome, with the clocks its failure budget
//! runs on (rules §12.3, §12.6).

use super::*;

/// What a call to a plugin found out about it.
#[derive(Clone, Debug)]
pub(super) enum Seen {
    /// `Initialize` answered, with this description.
    Initialized { description: String, at: Timestamp },
    /// A call about a cluster was answered (an error status about that call included:
    /// the plugin works).
    Answered { at: Timestamp },
    /// `Initialize`, or a call about a cluster (`about_a_cluster`), timed out or answered
    /// a status saying the plugin does not work.
    Down {
        why: String,
        at: Timestamp,
        about_a_cluster: bool,
    },
}

/// A plugin's health as this replica's own calls found it, with what its last outage and
/// recovery were: a flap shorter than two poll intervals restarts neither the
/// unavailability clock nor the deadlines (rules §12.3), and an outage that a call about a
/// cluster took part in ends only when such a call succeeds (rules §12.6).
#[derive(Clone, Debug)]
pub(super) struct Tracked {
    pub(super) health: PluginHealth,
    /// The description its last `Initialize` gave.
    pub(super) description: String,
    /// When it last became available.
    pub(super) up_since: Option<Timestamp>,
    /// The last outage that ended: (start, end).
    pub(super) last_outage: Option<(Timestamp, Timestamp)>,
    /// A call about a cluster failed during the outage it is in.
    pub(super) calls_failed: bool,
}

impl Tracked {
    /// Nothing asked yet.
    pub(super) fn unknown() -> Self {
        Self {
            health: PluginHealth::Unknown,
            description: String::new(),
            up_since: None,
            last_outage: None,
            calls_failed: false,
        }
    }

    /// Takes in `seen`; true when the health the planner sees changed.
    pub(super) fn settle(&mut self, seen: Seen, flap: SignedDuration) -> bool {
        use PluginHealth::{Available, Recovering, Unknown, Unreachable};
        if let Seen::Initialized { description, .. } = &seen {
            self.description.clone_from(description);
        }
        let next = match (&self.health, seen) {
            (Unknown, Seen::Answered { .. }) => None,
            (Unknown | Available { .. }, Seen::Initialized { at, .. }) => {
                let since = self.up_since.unwrap_or(at);
                self.up_since = Some(since);
                Some(Available {
                    description: self.description.clone(),
                    since,
                })
            }
            (Available { .. }, Seen::Answered { .. }) => None,
            (
                Unknown | Available { .. },
                Seen::Down {
                    why,
                    at,
                    about_a_cluster,
                },
            ) => {
                let short = |(_, end): &(Timestamp, Timestamp)| at.duration_since(*end) < flap;
                let since = self
                    .last_outage
                    .filter(short)
                    .map_or(at, |(start, _)| start);
                self.calls_failed = about_a_cluster;
                Some(Unreachable { why, since })
            }
            (Unreachable { since, .. }, Seen::Initialized { at, .. }) if !self.calls_failed => {
                Some(self.recovered(*since, at, flap))
            }
            (Unreachable { why, since }, Seen::Initialized { .. }) => Some(Recovering {
                why: why.clone(),
                since: *since,
            }),
            (Recovering { .. }, Seen::Initialized { .. }) => None,
            (Unreachable { since, .. } | Recovering { since, .. }, Seen::Answered { at }) => {
                Some(self.recovered(*since, at, flap))
            }
            // Its Initialize answers and calls about clusters fail: it stays recovering,
            // asked again at each poll.
            (
                Recovering { since, .. },
                Seen::Down {
                    why,
                    about_a_cluster: true,
                    ..
                },
            ) => Some(Recovering { why, since: *since }),
            (
                Unreachable { since, .. } | Recovering { since, .. },
                Seen::Down {
                    why,
                    about_a_cluster,
                    ..
                },
            ) => {
                self.calls_failed |= about_a_cluster;
                Some(Unreachable { why, since: *since })
            }
        };
        match next {
            Some(health) if health != self.health => {
                self.health = health;
                true
            }
            _ => false,
        }
    }

    /// Available again at `at` after an outage since `down`: the time it has been up
    /// counts from before the outage when the outage was a flap.
    pub(super) fn recovered(
        &mut self,
        down: Timestamp,
        at: Timestamp,
        flap: SignedDuration,
    ) -> PluginHealth {
        self.last_outage = Some((down, at));
        self.calls_failed = false;
        let since = self
            .up_since
            .filter(|_| at.duration_since(down) < flap)
            .unwrap_or(at);
        self.up_since = Some(since);
        PluginHealth::Available {
            description: self.description.clone(),
            since,
        }
    }
}

impl Plugins {
    /// May an MWRS of `namespace` use `plugin`? (Its registration's `namespaces`.)
    pub(super) fn serves(&self, plugin: &str, namespace: &str) -> bool {
        self.namespaces
            .get(plugin)
            .is_none_or(|n| n.contains(namespace))
    }

    /// `health` as an MWRS of `namespace` sees `plugin`: a plugin not open to the
    /// namespace holds its clusters for ever (no call is made, no budget runs).
    pub(super) fn health_for(
        &self,
        plugin: &str,
        namespace: &str,
        health: &PluginHealth,
    ) -> PluginHealth {
        let Some(open) = self
            .namespaces
            .get(plugin)
            .filter(|n| !n.contains(namespace))
        else {
            return health.clone();
        };
        let open: Vec<&str> = open.iter().map(String::as_str).collect();
        PluginHealth::Unreachable {
            why: format!(
                "not open to namespace {namespace}: its registration lists namespaces {}",
                open.join(", ")
            ),
            since: Timestamp::MAX,
        }
    }

    /// Each plugin presenting a client certificate, with when the one in use expires (or
    /// why that cannot be read).
    pub fn client_cert_expiries(&self) -> Vec<(&str, Result<i64, String>)> {
        (self.clients.iter())
            .filter_map(|(name, c)| Some((name.as_str(), c.client_cert_not_after()?)))
            .collect()
    }

    /// `Initialize` on every plugin, to learn which answer; true when any plugin's health
    /// changed.
    pub async fn probe(&self) -> bool {
        let mut changed = false;
        for (name, client) in &self.clients {
            let request = api::InitializeRequest {
                plugin: name.clone(),
                controller_version: self.controller_version.clone(),
            };
            let seen = match client.initialize(request).await {
                Ok(r) => Seen::Initialized {
                    description: cut(r.description, PLUGIN_TEXT_MAX),
                    at: Timestamp::now(),
                },
                Err(s) => Seen::Down {
                    why: format!("Initialize: {}", status_line(&s)),
                    at: Timestamp::now(),
                    about_a_cluster: false,
                },
            };
            changed |= self.set_health(name, seen);
        }
        changed
    }

    /// Takes in what a call to `name` found; false when the planner's view of it stays
    /// the same ([`Tracked::settle`] has the rules).
    pub(super) fn set_health(&self, name: &str, seen: Seen) -> bool {
        // Every answer says the plugin works; a read settles it without the write lock
        // while that is what is known.
        if matches!(seen, Seen::Answered { .. })
            && self.health.read().is_ok_and(|h| {
                h.get(name).is_some_and(|t| {
                    matches!(
                        t.health,
                        PluginHealth::Available { .. } | PluginHealth::Unknown
                    )
                })
            })
        {
            return false;
        }
        let Ok(mut h) = self.health.write() else {
            return false;
        };
        let flap = SignedDuration::try_from(self.poll * 2).unwrap_or(SignedDuration::MAX);
        let t = h.entry(name.to_string()).or_insert_with(Tracked::unknown);
        if !t.settle(seen, flap) {
            return false;
        }
        match &t.health {
            PluginHealth::Available { description, .. } => {
                tracing::info!(plugin = name, %description, "rollout plugin available")
            }
            PluginHealth::Unreachable { why, .. } => {
                tracing::warn!(plugin = name, %why, "rollout plugin unreachable")
            }
            PluginHealth::Recovering { why, .. } => tracing::warn!(
                plugin = name, %why,
                "rollout plugin's Initialize answers again; down until a call about a cluster succeeds"
            ),
            PluginHealth::Unknown => {}
        }
        true
    }

    /// What a call about a cluster that answered `s` says of `plugin`: it works when the
    /// status is about the call (the call goes wrong, not the plugin), else it is down.
    pub(super) fn health_after(
        &self,
        plugin: &str,
        s: &tonic::Status,
        why: &str,
        at: Timestamp,
    ) -> bool {
        let seen = if is_about_the_call(s) {
            Seen::Answered { at }
        } else {
            Seen::Down {
                why: why.to_string(),
                at,
                about_a_cluster: true,
            }
        };
        self.set_health(plugin, seen)
    }
}

//! What the planner sees of one placementRef: whether its Placement exists and, if so,
//! the clusters its PlacementDecisions select, by decision group, and whether that set
//! is complete enough to delete anything on its word (rules §11.5).

use jiff::Timestamp;
use mwrs_api::labels;
use mwrs_api::placement::{Placement, PlacementDecision};

use crate::rollout::{DecisionGroups, GroupKey};

#[derive(Clone, Debug)]
pub enum PlacementState {
    /// No Placement object of that name in the MWRS namespace.
    Missing,
    /// The Placement exists but has no PlacementDecision at all (deleted, or not yet
    /// scheduled): its ManifestWorks are kept, its rollout stops.
    NoDecisions,
    /// Decisions that cannot be read (a bad group index label).
    Invalid(String),
    Found(DecisionGroups),
}

#[derive(Clone, Debug)]
pub struct PlacementView {
    pub name: String,
    pub state: PlacementState,
    /// Every decision page has its status and together they list as many clusters as
    /// the Placement's `numberOfSelectedClusters` (absent: incomplete). OCM's scheduler
    /// creates a page before it writes its status, and moves clusters between pages in
    /// several writes: between them the union is not the selection.
    pub complete: bool,
    /// When the controller last saw the Placement or one of its decisions change (None:
    /// not tracked). Nothing is deleted on the decisions' word until they have stayed
    /// unchanged for the settle time.
    pub changed_at: Option<Timestamp>,
    /// Decided cluster names that cannot be a cluster namespace (empty: OCM's "not
    /// scheduled yet"); skipped, never written to (rules §11.4).
    pub skipped: Vec<String>,
}

impl PlacementView {
    /// `decisions` are the PlacementDecisions labelled with this placement's name.
    pub fn from_objects<'a>(
        name: &str,
        placement: Option<&Placement>,
        decisions: impl IntoIterator<Item = &'a PlacementDecision>,
    ) -> Self {
        let Some(placement) = placement else {
            return Self::missing(name);
        };
        let read = read_decisions(decisions);
        let selected = placement
            .status
            .as_ref()
            .and_then(|s| s.number_of_selected_clusters);
        let complete = read.all_have_status || selected == Some(0);
        let complete = complete
            && match (&read.state, selected) {
                // Whether OCM counts an unscheduled (skipped) decision is not documented:
                // either count agrees.
                (PlacementState::Found(g), Some(n)) => usize::try_from(n)
                    .is_ok_and(|n| n == g.len() || n == g.len() + read.skipped.len()),
                // No count yet: a new or re-created Placement whose scheduler may still be
                // writing pages. What the pages hold so far is not the selection.
                (PlacementState::Found(_), None) => false,
                _ => false,
            };
        Self {
            name: name.to_string(),
            state: read.state,
            complete,
            changed_at: None,
            skipped: read.skipped,
        }
    }

    fn missing(name: &str) -> Self {
        Self {
            name: name.to_string(),
            state: PlacementState::Missing,
            complete: false,
            changed_at: None,
            skipped: Vec::new(),
        }
    }

    /// A Placement whose complete decisions are `groups` (simulations, tests).
    pub fn found(name: &str, groups: DecisionGroups) -> Self {
        Self {
            name: name.to_string(),
            state: PlacementState::Found(groups),
            complete: true,
            changed_at: None,
            skipped: Vec::new(),
        }
    }

    pub fn groups(&self) -> Option<&DecisionGroups> {
        match &self.state {
            PlacementState::Found(g) => Some(g),
            _ => None,
        }
    }
}

/// What a placement's decision pages say, read together.
struct Decisions {
    state: PlacementState,
    all_have_status: bool,
    skipped: Vec<String>,
}

fn read_decisions<'a>(decisions: impl IntoIterator<Item = &'a PlacementDecision>) -> Decisions {
    let mut pairs = Vec::new();
    let mut any = false;
    let mut all_have_status = true;
    let mut skipped = Vec::new();
    let invalid = |state| Decisions {
        state,
        all_have_status: false,
        skipped: Vec::new(),
    };
    for pd in decisions {
        any = true;
        all_have_status &= pd.status.is_some();
        let pd_labels = pd.metadata.labels.as_ref();
        let index = match pd_labels.and_then(|l| l.get(labels::DECISION_GROUP_INDEX)) {
            // OCM's scheduler always writes the index; a decision written without one
            // belongs to the first group.
            None => 0,
            Some(v) => match v.parse::<i32>() {
                Ok(i) if i >= 0 => i,
                _ => {
                    return invalid(PlacementState::Invalid(format!(
                        "PlacementDecision {}: incorrect group index {v:?}",
                        pd.metadata.name.as_deref().unwrap_or("")
                    )));
                }
            },
        };
        let group_name = pd_labels
            .and_then(|l| l.get(labels::DECISION_GROUP_NAME))
            .cloned()
            .unwrap_or_default();
        let key = GroupKey {
            name: group_name,
            index,
        };
        for c in pd.cluster_names() {
            if labels::is_dns_label(c) {
                pairs.push((key.clone(), c.to_string()));
            } else {
                skipped.push(c.to_string());
            }
        }
    }
    if !any {
        return invalid(PlacementState::NoDecisions);
    }
    Decisions {
        state: PlacementState::Found(DecisionGroups::from_pairs(pairs)),
        all_have_status,
        skipped,
    }
}

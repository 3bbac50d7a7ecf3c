//! What the planner sees of one placementRef: whether its Placement exists and, if so,
//! the clusters its PlacementDecisions select, by decision group.

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
}

impl PlacementView {
    /// `decisions` are the PlacementDecisions labelled with this placement's name.
    pub fn from_objects<'a>(
        name: &str,
        placement: Option<&Placement>,
        decisions: impl IntoIterator<Item = &'a PlacementDecision>,
    ) -> Self {
        let state = match placement {
            None => PlacementState::Missing,
            Some(_) => groups_of(decisions),
        };
        Self {
            name: name.to_string(),
            state,
        }
    }

    pub fn found(name: &str, groups: DecisionGroups) -> Self {
        Self {
            name: name.to_string(),
            state: PlacementState::Found(groups),
        }
    }

    pub fn groups(&self) -> Option<&DecisionGroups> {
        match &self.state {
            PlacementState::Found(g) => Some(g),
            _ => None,
        }
    }
}

fn groups_of<'a>(decisions: impl IntoIterator<Item = &'a PlacementDecision>) -> PlacementState {
    let mut pairs = Vec::new();
    let mut any = false;
    for pd in decisions {
        any = true;
        let pd_labels = pd.metadata.labels.as_ref();
        let index = match pd_labels.and_then(|l| l.get(labels::DECISION_GROUP_INDEX)) {
            // OCM's scheduler always writes the index; a decision written without one
            // belongs to the first group.
            None => 0,
            Some(v) => match v.parse::<i32>() {
                Ok(i) if i >= 0 => i,
                _ => {
                    return PlacementState::Invalid(format!(
                        "PlacementDecision {}: incorrect group index {v:?}",
                        pd.metadata.name.as_deref().unwrap_or("")
                    ));
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
        pairs.extend(pd.cluster_names().map(|c| (key.clone(), c.to_string())));
    }
    if !any {
        return PlacementState::NoDecisions;
    }
    PlacementState::Found(DecisionGroups::from_pairs(pairs))
}

//! A placement's clusters by decision group (what upstream's
//! `PlacementDecisionClustersTracker` holds once refreshed), and the group selections
//! the engine works on: mandatory groups resolved by name or index, and "every group
//! besides" them.

use std::collections::{BTreeMap, BTreeSet};

use mwrs_api::rollout::MandatoryDecisionGroup;

/// A decision group: its name (empty for unnamed groups) and index. Ordered by index,
/// then name, which is the order groups roll out in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupKey {
    pub name: String,
    pub index: i32,
}

impl GroupKey {
    pub fn new(name: impl Into<String>, index: i32) -> Self {
        Self {
            name: name.into(),
            index,
        }
    }
}

impl Ord for GroupKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.index, &self.name).cmp(&(other.index, &other.name))
    }
}

impl PartialOrd for GroupKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// One entry of `mandatoryDecisionGroups`, as upstream reads it: a non-empty
/// `groupName` wins over `groupIndex`; neither means index 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MandatoryGroup {
    /// Every group carrying this name (a name may span several indices).
    Name(String),
    Index(i32),
}

/// Upstream's `decisionGroupsToGroupKeys`.
pub fn mandatory_groups(list: &[MandatoryDecisionGroup]) -> Vec<MandatoryGroup> {
    list.iter()
        .map(|g| match g.group_name.as_deref() {
            Some(name) if !name.is_empty() => MandatoryGroup::Name(name.to_string()),
            _ => MandatoryGroup::Index(g.group_index.unwrap_or(0)),
        })
        .collect()
}

/// The clusters of one placement, per decision group.
///
/// A cluster listed in several groups (which OCM's scheduler never does) is kept in the
/// first of them by group order only, so every cluster has exactly one group; upstream
/// would pick one at random.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecisionGroups {
    groups: BTreeMap<GroupKey, BTreeSet<String>>,
    by_cluster: BTreeMap<String, GroupKey>,
}

impl DecisionGroups {
    /// Builds the groups from `(group, cluster)` pairs, e.g. one per decision of every
    /// PlacementDecision of the placement.
    pub fn from_pairs<I>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (GroupKey, String)>,
    {
        let mut by_cluster: BTreeMap<String, GroupKey> = BTreeMap::new();
        for (key, cluster) in pairs {
            match by_cluster.get_mut(&cluster) {
                Some(have) if *have <= key => {}
                Some(have) => *have = key,
                None => {
                    by_cluster.insert(cluster, key);
                }
            }
        }
        let mut groups: BTreeMap<GroupKey, BTreeSet<String>> = BTreeMap::new();
        for (cluster, key) in &by_cluster {
            groups
                .entry(key.clone())
                .or_default()
                .insert(cluster.clone());
        }
        Self { groups, by_cluster }
    }

    pub fn contains(&self, cluster: &str) -> bool {
        self.by_cluster.contains_key(cluster)
    }

    pub fn group_of(&self, cluster: &str) -> Option<&GroupKey> {
        self.by_cluster.get(cluster)
    }

    /// Group keys in rollout order (index, then name).
    pub fn keys(&self) -> impl Iterator<Item = &GroupKey> {
        self.groups.keys()
    }

    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Clusters of one group, by name.
    pub fn members(&self, key: &GroupKey) -> impl Iterator<Item = &str> {
        self.groups
            .get(key)
            .into_iter()
            .flat_map(|set| set.iter().map(String::as_str))
    }

    /// Every cluster, by name.
    pub fn clusters(&self) -> impl Iterator<Item = &str> {
        self.by_cluster.keys().map(String::as_str)
    }

    /// Number of clusters.
    pub fn len(&self) -> usize {
        self.by_cluster.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_cluster.is_empty()
    }

    /// Every `(group, cluster)`, in group order then by cluster name.
    pub fn iter(&self) -> impl Iterator<Item = (&GroupKey, &str)> {
        self.groups
            .iter()
            .flat_map(|(k, set)| set.iter().map(move |c| (k, c.as_str())))
    }

    /// The existing groups the mandatory list names (upstream's `fulfillGroupKeys`): a
    /// name selects every index carrying it; an index selects that group whatever its
    /// name. Entries matching nothing are ignored.
    pub fn resolve_mandatory(&self, mandatory: &[MandatoryGroup]) -> BTreeSet<GroupKey> {
        self.groups
            .keys()
            .filter(|k| {
                mandatory.iter().any(|m| match m {
                    MandatoryGroup::Name(name) => k.name == *name,
                    MandatoryGroup::Index(index) => k.index == *index,
                })
            })
            .cloned()
            .collect()
    }

    /// The groups upstream's tracker can see when listing "all groups besides": it walks
    /// indices `0..number of distinct indices`, so a gap in the indices hides every
    /// group after it (and negative indices are never seen).
    pub(crate) fn upstream_visible(&self) -> BTreeSet<GroupKey> {
        let distinct: BTreeSet<i32> = self.groups.keys().map(|k| k.index).collect();
        let bound = i32::try_from(distinct.len()).unwrap_or(i32::MAX);
        self.groups
            .keys()
            .filter(|k| (0..bound).contains(&k.index))
            .cloned()
            .collect()
    }
}

/// A subset of a placement's groups the engine is working on, borrowed.
#[derive(Clone, Debug)]
pub(crate) struct Selection<'a> {
    groups: &'a DecisionGroups,
    keys: BTreeSet<GroupKey>,
}

impl<'a> Selection<'a> {
    pub(crate) fn new(groups: &'a DecisionGroups, keys: BTreeSet<GroupKey>) -> Self {
        Self { groups, keys }
    }

    pub(crate) fn all(groups: &'a DecisionGroups) -> Self {
        Self::new(groups, groups.keys().cloned().collect())
    }

    /// This selection without the given groups.
    pub(crate) fn without(&self, exclude: &BTreeSet<GroupKey>) -> Self {
        Self::new(
            self.groups,
            self.keys.difference(exclude).cloned().collect(),
        )
    }

    pub(crate) fn contains(&self, cluster: &str) -> bool {
        self.groups
            .group_of(cluster)
            .is_some_and(|k| self.keys.contains(k))
    }

    pub(crate) fn cluster_count(&self) -> usize {
        self.keys.iter().map(|k| self.group_len(k)).sum()
    }

    pub(crate) fn group_len(&self, key: &GroupKey) -> usize {
        self.groups.groups.get(key).map_or(0, BTreeSet::len)
    }

    /// Groups in rollout order with their clusters by name.
    pub(crate) fn groups(
        &self,
    ) -> impl Iterator<Item = (&'a GroupKey, impl Iterator<Item = &'a str>)> {
        let all = &self.groups.groups;
        self.keys.iter().filter_map(move |k| {
            all.get_key_value(k)
                .map(|(key, set)| (key, set.iter().map(String::as_str)))
        })
    }

    /// Every selected cluster with its group, by cluster name.
    pub(crate) fn clusters_by_name(&self) -> impl Iterator<Item = (&'a str, &'a GroupKey)> {
        let keys = &self.keys;
        self.groups
            .by_cluster
            .iter()
            .filter(move |(_, k)| keys.contains(*k))
            .map(|(c, k)| (c.as_str(), k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(spec: &[(&str, i32, &[&str])]) -> DecisionGroups {
        DecisionGroups::from_pairs(spec.iter().flat_map(|(name, index, clusters)| {
            clusters
                .iter()
                .map(move |c| (GroupKey::new(*name, *index), c.to_string()))
        }))
    }

    fn keys(spec: &[(&str, i32)]) -> BTreeSet<GroupKey> {
        spec.iter().map(|(n, i)| GroupKey::new(*n, *i)).collect()
    }

    fn clusters_of(g: &DecisionGroups, keys: &BTreeSet<GroupKey>) -> BTreeSet<String> {
        let sel = Selection::new(g, keys.clone());
        sel.clusters_by_name().map(|(c, _)| c.to_string()).collect()
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn key_order_is_index_then_name() {
        let mut v = vec![
            GroupKey::new("b", 1),
            GroupKey::new("z", 0),
            GroupKey::new("a", 1),
        ];
        v.sort();
        assert_eq!(
            v,
            vec![
                GroupKey::new("z", 0),
                GroupKey::new("a", 1),
                GroupKey::new("b", 1)
            ]
        );
    }

    #[test]
    fn a_cluster_listed_twice_stays_in_its_first_group() {
        let g = groups(&[("b", 1, &["c1", "c2"]), ("a", 0, &["c2"])]);
        assert_eq!(g.group_of("c2"), Some(&GroupKey::new("a", 0)));
        assert_eq!(g.len(), 2);
        let pairs: Vec<_> = g.iter().map(|(k, c)| (k.index, c)).collect();
        assert_eq!(pairs, vec![(0, "c2"), (1, "c1")]);
    }

    #[test]
    fn upstream_visibility_stops_at_a_gap() {
        let g = groups(&[("", 0, &["a"]), ("", 2, &["b"]), ("", 3, &["c"])]);
        assert_eq!(g.upstream_visible(), keys(&[("", 0), ("", 2)]));
        let contiguous = groups(&[("", 0, &["a"]), ("", 1, &["b"])]);
        assert_eq!(contiguous.upstream_visible(), keys(&[("", 0), ("", 1)]));
    }

    // sdk-go v1beta1 placement_test.go, TestPlacementDecisionClustersTracker_Existing.
    fn tracker_existing(
        groups_spec: &[(&str, i32, &[&str])],
        mandatory: &[MandatoryGroup],
        want: &[&str],
        besides: &[&str],
    ) {
        let g = groups(groups_spec);
        let m = g.resolve_mandatory(mandatory);
        assert_eq!(clusters_of(&g, &m), names(want));
        let rest: BTreeSet<GroupKey> = g.keys().filter(|k| !m.contains(k)).cloned().collect();
        assert_eq!(clusters_of(&g, &rest), names(besides));
    }

    const TWO_GROUPS: &[(&str, i32, &[&str])] = &[
        ("group1", 0, &["cluster1", "cluster2"]),
        ("group2", 1, &["cluster3", "cluster4"]),
    ];

    #[test]
    fn tracker_existing_test_full_group_key() {
        let m = [
            MandatoryGroup::Name("group1".into()),
            MandatoryGroup::Index(1),
            MandatoryGroup::Name("group3".into()),
        ];
        tracker_existing(
            TWO_GROUPS,
            &m,
            &["cluster1", "cluster2", "cluster3", "cluster4"],
            &[],
        );
    }

    #[test]
    fn tracker_existing_test_part_of_group_key() {
        let m = [MandatoryGroup::Name("group1".into())];
        tracker_existing(
            TWO_GROUPS,
            &m,
            &["cluster1", "cluster2"],
            &["cluster3", "cluster4"],
        );
    }

    #[test]
    fn tracker_existing_test_empty_group_key() {
        tracker_existing(
            TWO_GROUPS,
            &[],
            &[],
            &["cluster1", "cluster2", "cluster3", "cluster4"],
        );
    }

    // sdk-go v1beta1 placement_test.go, TestPlacementDecisionClustersTracker_ExistingClusterGroups.
    const THREE_GROUPS: &[(&str, i32, &[&str])] = &[
        ("group1", 0, &["cluster1", "cluster2"]),
        ("group1", 1, &["cluster3", "cluster4"]),
        ("group2", 2, &["cluster5", "cluster6"]),
    ];

    fn tracker_groups(mandatory: &[MandatoryGroup], want: &[(&str, i32)], besides: &[(&str, i32)]) {
        let g = groups(THREE_GROUPS);
        let m = g.resolve_mandatory(mandatory);
        assert_eq!(m, keys(want));
        let rest: BTreeSet<GroupKey> = g.keys().filter(|k| !m.contains(k)).cloned().collect();
        assert_eq!(rest, keys(besides));
    }

    #[test]
    fn tracker_existing_cluster_groups_test_full_group_key() {
        let m = [
            MandatoryGroup::Name("group1".into()),
            MandatoryGroup::Index(2),
            MandatoryGroup::Name("group3".into()),
        ];
        tracker_groups(&m, &[("group1", 0), ("group1", 1), ("group2", 2)], &[]);
    }

    #[test]
    fn tracker_existing_cluster_groups_test_part_of_group_key() {
        let m = [MandatoryGroup::Name("group1".into())];
        tracker_groups(&m, &[("group1", 0), ("group1", 1)], &[("group2", 2)]);
    }

    #[test]
    fn tracker_existing_cluster_groups_test_empty_group_key() {
        tracker_groups(&[], &[], &[("group1", 0), ("group1", 1), ("group2", 2)]);
    }
}

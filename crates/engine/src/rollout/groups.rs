//! A placement's clusters by decision group (what upstream's
//! `PlacementDecisionClustersTracker` holds once refreshed), and the group selections
//! the engine works on: mandatory groups resolved by name or index, and "every group
//! besides" them.

use std::collections::BTreeSet;
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

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
///
/// Laid out for fleets of 100,000 clusters: names are stored once, sorted, and every
/// per-cluster lookup is a hash probe (ordered-tree lookups compared long common-prefix
/// names a dozen times each, which made a planner pass superlinear).
#[derive(Clone)]
pub struct DecisionGroups {
    /// Group keys in rollout order (index, then name).
    keys: Vec<GroupKey>,
    /// Every cluster by name, with the position of its group in `keys`.
    clusters: Vec<(String, u32)>,
    /// Per group (same positions as `keys`): positions in `clusters`, by name.
    members: Vec<Vec<u32>>,
    /// Cluster name → position in `clusters`.
    index: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

impl Default for DecisionGroups {
    fn default() -> Self {
        Self::from_pairs(std::iter::empty())
    }
}

impl PartialEq for DecisionGroups {
    fn eq(&self, other: &Self) -> bool {
        self.keys == other.keys && self.clusters == other.clusters
    }
}

impl Eq for DecisionGroups {}

impl std::fmt::Debug for DecisionGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.keys.iter().zip(&self.members).map(|(k, m)| {
                let names: Vec<&str> = m.iter().map(|i| self.name(*i)).collect();
                (k, names)
            }))
            .finish()
    }
}

impl DecisionGroups {
    /// Builds the groups from `(group, cluster)` pairs, e.g. one per decision of every
    /// PlacementDecision of the placement.
    pub fn from_pairs<I>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (GroupKey, String)>,
    {
        let mut pairs: Vec<(String, GroupKey)> = pairs.into_iter().map(|(k, c)| (c, k)).collect();
        // Stable, so runs already in order (decisions list their clusters sorted) merge
        // in linear time; the first entry of each name then carries its lowest group.
        pairs.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        pairs.dedup_by(|later, first| later.0 == first.0);
        let mut keys: Vec<GroupKey> = pairs.iter().map(|(_, k)| k.clone()).collect();
        keys.sort_unstable();
        keys.dedup();
        let hasher = DefaultHashBuilder::default();
        let mut index = HashTable::with_capacity(pairs.len());
        let mut members = vec![Vec::new(); keys.len()];
        let mut clusters = Vec::with_capacity(pairs.len());
        for (cluster, key) in pairs {
            let (Ok(i), Ok(Ok(group))) = (
                u32::try_from(clusters.len()),
                keys.binary_search(&key).map(u32::try_from),
            ) else {
                // More than 4 billion clusters in one placement: beyond any hub.
                continue;
            };
            let h = hasher.hash_one(cluster.as_str());
            index.insert_unique(h, i, |j: &u32| hash_at(&hasher, &clusters, *j));
            members[group as usize].push(i);
            clusters.push((cluster, group));
        }
        Self {
            keys,
            clusters,
            members,
            index,
            hasher,
        }
    }

    fn name(&self, i: u32) -> &str {
        &self.clusters[i as usize].0
    }

    /// Position of a cluster in `clusters`.
    fn position(&self, cluster: &str) -> Option<usize> {
        let h = self.hasher.hash_one(cluster);
        self.index
            .find(h, |i| self.name(*i) == cluster)
            .map(|i| *i as usize)
    }

    /// Position of a group in `keys`.
    fn key_position(&self, key: &GroupKey) -> Option<usize> {
        self.keys.binary_search(key).ok()
    }

    pub fn contains(&self, cluster: &str) -> bool {
        self.position(cluster).is_some()
    }

    pub fn group_of(&self, cluster: &str) -> Option<&GroupKey> {
        self.position(cluster)
            .map(|i| &self.keys[self.clusters[i].1 as usize])
    }

    /// Group keys in rollout order (index, then name).
    pub fn keys(&self) -> impl Iterator<Item = &GroupKey> {
        self.keys.iter()
    }

    pub fn group_count(&self) -> usize {
        self.keys.len()
    }

    /// Clusters of one group, by name.
    pub fn members(&self, key: &GroupKey) -> impl Iterator<Item = &str> {
        self.key_position(key)
            .into_iter()
            .flat_map(|g| self.members[g].iter().map(|i| self.name(*i)))
    }

    /// Every cluster, by name.
    pub fn clusters(&self) -> impl Iterator<Item = &str> {
        self.clusters.iter().map(|(c, _)| c.as_str())
    }

    /// Every cluster with its group, by cluster name.
    pub fn by_name(&self) -> impl Iterator<Item = (&str, &GroupKey)> {
        self.clusters
            .iter()
            .map(|(c, g)| (c.as_str(), &self.keys[*g as usize]))
    }

    /// Number of clusters.
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// Every `(group, cluster)`, in group order then by cluster name.
    pub fn iter(&self) -> impl Iterator<Item = (&GroupKey, &str)> {
        self.keys
            .iter()
            .zip(&self.members)
            .flat_map(move |(k, m)| m.iter().map(move |i| (k, self.name(*i))))
    }

    /// The existing groups the mandatory list names (upstream's `fulfillGroupKeys`): a
    /// name selects every index carrying it; an index selects that group whatever its
    /// name. Entries matching nothing are ignored.
    pub fn resolve_mandatory(&self, mandatory: &[MandatoryGroup]) -> BTreeSet<GroupKey> {
        self.keys
            .iter()
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
        let distinct: BTreeSet<i32> = self.keys.iter().map(|k| k.index).collect();
        let bound = i32::try_from(distinct.len()).unwrap_or(i32::MAX);
        self.keys
            .iter()
            .filter(|k| (0..bound).contains(&k.index))
            .cloned()
            .collect()
    }
}

fn hash_at(hasher: &DefaultHashBuilder, clusters: &[(String, u32)], i: u32) -> u64 {
    hasher.hash_one(clusters[i as usize].0.as_str())
}

/// A subset of a placement's groups the engine is working on, borrowed.
#[derive(Clone, Debug)]
pub(crate) struct Selection<'a> {
    groups: &'a DecisionGroups,
    /// Per group position: selected or not.
    selected: Vec<bool>,
}

impl<'a> Selection<'a> {
    pub(crate) fn new(groups: &'a DecisionGroups, keys: BTreeSet<GroupKey>) -> Self {
        let selected = groups.keys.iter().map(|k| keys.contains(k)).collect();
        Self { groups, selected }
    }

    pub(crate) fn all(groups: &'a DecisionGroups) -> Self {
        Self {
            groups,
            selected: vec![true; groups.keys.len()],
        }
    }

    /// This selection without the given groups.
    pub(crate) fn without(&self, exclude: &BTreeSet<GroupKey>) -> Self {
        let selected = self
            .groups
            .keys
            .iter()
            .zip(&self.selected)
            .map(|(k, s)| *s && !exclude.contains(k))
            .collect();
        Self {
            groups: self.groups,
            selected,
        }
    }

    pub(crate) fn contains(&self, cluster: &str) -> bool {
        self.groups
            .position(cluster)
            .is_some_and(|i| self.selected[self.groups.clusters[i].1 as usize])
    }

    pub(crate) fn cluster_count(&self) -> usize {
        self.groups
            .members
            .iter()
            .zip(&self.selected)
            .filter(|(_, s)| **s)
            .map(|(m, _)| m.len())
            .sum()
    }

    pub(crate) fn group_len(&self, key: &GroupKey) -> usize {
        self.groups
            .key_position(key)
            .map_or(0, |g| self.groups.members[g].len())
    }

    /// Groups in rollout order with their clusters by name.
    pub(crate) fn groups(
        &self,
    ) -> impl Iterator<Item = (&'a GroupKey, impl Iterator<Item = &'a str>)> + '_ {
        let g = self.groups;
        g.keys
            .iter()
            .zip(&g.members)
            .zip(&self.selected)
            .filter(|(_, s)| **s)
            .map(move |((k, m), _)| (k, m.iter().map(move |i| g.name(*i))))
    }

    /// Every selected cluster with its group, by cluster name.
    pub(crate) fn clusters_by_name(&self) -> impl Iterator<Item = (&'a str, &'a GroupKey)> + '_ {
        let g = self.groups;
        g.clusters
            .iter()
            .filter(|(_, k)| self.selected[*k as usize])
            .map(move |(c, k)| (c.as_str(), &g.keys[*k as usize]))
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

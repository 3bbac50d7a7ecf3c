//! Who owns a ManifestWork: the owner label value (or its hashed form for long owners,
//! rules §10.14) and the deterministic ManifestWork name (rules §5, §10.13).

use std::collections::BTreeMap;

use mwrs_api::labels;

use crate::hash;
use crate::revision::truncate_name;

/// Most characters of a ManifestWork name: the agent prefixes a 64-character hash and a
/// dash to build the AppliedManifestWork name, which must stay within 253.
pub const MAX_WORK_NAME_LEN: usize = 188;

/// How one MWRS marks the objects it owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerKey {
    pub namespace: String,
    pub name: String,
}

impl OwnerKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// `<ns>.<name>`, upstream's owner label value.
    pub fn dotted(&self) -> String {
        format!("{}.{}", self.namespace, self.name)
    }

    /// `<ns>/<name>`, the owner annotation value.
    pub fn slashed(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// 32 hex characters of SHA-256 of `ns/name`.
    pub fn hashed(&self) -> String {
        hash::sha256_hex(&self.slashed(), 16)
    }

    /// Whether upstream's dotted label can carry this owner.
    pub fn fits_label(&self) -> bool {
        labels::is_valid_label_value(&self.dotted())
    }

    /// The label (key, value) selecting this owner's objects.
    pub fn selector(&self) -> (&'static str, String) {
        if self.fits_label() {
            (labels::MWRS_OWNER, self.dotted())
        } else {
            (labels::OWNER_KEY_HASH, self.hashed())
        }
    }

    /// The label an owned ManifestWork carries besides [`Self::selector`] when the owner
    /// is too long for the dotted label: upstream's key with the hashed owner as its value.
    /// Upstream's hub garbage collector (`CleanUpCompletedManifestWork`) spares a completed
    /// ManifestWork with a TTL only when it carries that key; a value without a dot never
    /// names a dotted owner.
    pub fn collector_mark(&self) -> Option<(&'static str, String)> {
        (!self.fits_label()).then(|| (labels::MWRS_OWNER, self.hashed()))
    }

    /// Upstream's owner key with the value every ManifestWork of this owner carries: the
    /// dotted owner, or for a long owner its [`Self::collector_mark`]. Values never collide
    /// across the two forms (a hashed value has no dot), so one watch of that key, filed
    /// by value, finds the ManifestWorks of every owner.
    pub fn upstream_label(&self) -> (&'static str, String) {
        self.collector_mark()
            .unwrap_or_else(|| (labels::MWRS_OWNER, self.dotted()))
    }

    /// Owner labels every owned object carries.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let (k, v) = self.selector();
        BTreeMap::from([(k.to_string(), v)])
    }

    /// Does an object with these labels and annotations belong to this owner? Only when
    /// it carries this owner's selector label and every other ownership mark it carries
    /// (dotted label, hashed label, owner annotation) names this owner too (rules §11.4):
    /// one mark another MWRS can influence never proves ownership on its own.
    pub fn owns(
        &self,
        obj_labels: &BTreeMap<String, String>,
        obj_annotations: &BTreeMap<String, String>,
    ) -> bool {
        let (k, v) = self.selector();
        let annotation = obj_annotations.get(labels::MWRS_OWNER_ANNOTATION);
        obj_labels.get(k) == Some(&v)
            && obj_labels.get(labels::MWRS_OWNER).is_none_or(|d| {
                let mine = if self.fits_label() {
                    self.dotted()
                } else {
                    self.hashed()
                };
                *d == mine
            })
            && obj_labels
                .get(labels::OWNER_KEY_HASH)
                .is_none_or(|h| *h == self.hashed())
            && annotation.is_none_or(|a| *a == self.slashed())
            && (self.fits_label() || annotation.is_some())
    }

    /// The owner an object names, from its labels and annotations: the dotted label
    /// (split at the first dot: namespaces cannot contain dots, names can), else the
    /// annotation.
    pub fn of_object(
        obj_labels: &BTreeMap<String, String>,
        obj_annotations: &BTreeMap<String, String>,
    ) -> Option<Self> {
        if let Some((ns, name)) = obj_annotations
            .get(labels::MWRS_OWNER_ANNOTATION)
            .and_then(|v| v.split_once('/'))
        {
            return Some(Self::new(ns, name));
        }
        obj_labels
            .get(labels::MWRS_OWNER)
            .and_then(|v| v.split_once('.'))
            .map(|(ns, name)| Self::new(ns, name))
    }

    /// The ManifestWork name in every cluster namespace: `<ns>.<name>` when it fits, else
    /// a cut prefix and a hash of the owner. Derived from the owner only, so a stale cache
    /// can never make a second name for the same cluster.
    pub fn work_name(&self) -> String {
        let dotted = self.dotted();
        if dotted.len() <= MAX_WORK_NAME_LEN {
            return dotted;
        }
        let suffix = hash::sha256_hex(&self.slashed(), 8);
        let prefix = truncate_name(&dotted, MAX_WORK_NAME_LEN - suffix.len() - 1);
        format!("{prefix}-{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_owner_uses_dotted_label() {
        let o = OwnerKey::new("default", "my.app");
        assert!(o.fits_label());
        assert_eq!(
            o.selector(),
            (labels::MWRS_OWNER, "default.my.app".to_string())
        );
        assert_eq!(o.work_name(), "default.my.app");
        let parsed = OwnerKey::of_object(&o.labels(), &BTreeMap::new()).unwrap();
        assert_eq!(parsed, o);
    }

    #[test]
    fn long_owner_uses_hash_and_annotation() {
        let o = OwnerKey::new(
            "a-namespace-of-forty-characters-long-xx",
            "a-long-replica-set-name-x",
        );
        assert!(!o.fits_label());
        let (k, v) = o.selector();
        assert_eq!(k, labels::OWNER_KEY_HASH);
        assert_eq!(v.len(), 32);
        let ann = BTreeMap::from([(labels::MWRS_OWNER_ANNOTATION.to_string(), o.slashed())]);
        assert!(o.owns(&o.labels(), &ann));
        assert!(!o.owns(&o.labels(), &BTreeMap::new()));
        assert_eq!(OwnerKey::of_object(&o.labels(), &ann).unwrap(), o);
    }

    /// A long-named MWRS whose own labels carried another owner's dotted label used to
    /// pass it on to its ManifestWorks, which the other owner then took for its own.
    #[test]
    fn an_object_with_marks_of_two_owners_belongs_to_neither() {
        let victim = OwnerKey::new("tenant-a", "app");
        let attacker = OwnerKey::new("tenant-b", "a".repeat(64));
        let mut l = attacker.labels();
        l.insert(labels::MWRS_OWNER.into(), victim.dotted());
        let a = BTreeMap::from([(
            labels::MWRS_OWNER_ANNOTATION.to_string(),
            attacker.slashed(),
        )]);
        assert!(!victim.owns(&l, &a));
        assert!(!attacker.owns(&l, &a));
        // The victim's own marks, plus an annotation naming someone else.
        let forged = BTreeMap::from([(
            labels::MWRS_OWNER_ANNOTATION.to_string(),
            attacker.slashed(),
        )]);
        assert!(!victim.owns(&victim.labels(), &forged));
        // Consistent marks prove ownership.
        let mine = BTreeMap::from([(labels::MWRS_OWNER_ANNOTATION.to_string(), victim.slashed())]);
        assert!(victim.owns(&victim.labels(), &mine));
        assert!(victim.owns(&victim.labels(), &BTreeMap::new()));
    }

    #[test]
    fn work_names_are_bounded_and_distinct() {
        let a = OwnerKey::new("ns", "x".repeat(250));
        let b = OwnerKey::new("nt", "x".repeat(250));
        assert!(a.work_name().len() <= MAX_WORK_NAME_LEN);
        assert_ne!(a.work_name(), b.work_name());
        assert_ne!(
            OwnerKey::new("a", "b").work_name(),
            OwnerKey::new("b", "b").work_name()
        );
    }

    #[test]
    fn a_long_owner_carries_the_collectors_mark_and_owns_with_it() {
        let long = OwnerKey::new("ns", "x".repeat(70));
        let (k, v) = long.collector_mark().unwrap();
        assert_eq!(
            (k, v.as_str()),
            (labels::MWRS_OWNER, long.hashed().as_str())
        );
        assert!(!v.contains('.'), "never a dotted owner");
        let mut l = long.labels();
        l.insert(k.to_string(), v);
        let ann = BTreeMap::from([(labels::MWRS_OWNER_ANNOTATION.to_string(), long.slashed())]);
        assert!(long.owns(&l, &ann));
        let other = OwnerKey::new("ns", "y".repeat(70));
        l.insert(labels::MWRS_OWNER.into(), other.hashed());
        assert!(!long.owns(&l, &ann), "another owner's mark");
        assert_eq!(OwnerKey::new("ns", "app").collector_mark(), None);
    }

    #[test]
    fn every_owner_has_an_upstream_label_and_no_two_share_one() {
        let short = OwnerKey::new("ns", "app");
        let long = OwnerKey::new("ns", "x".repeat(70));
        assert_eq!(short.upstream_label(), (labels::MWRS_OWNER, short.dotted()));
        assert_eq!(Some(long.upstream_label()), long.collector_mark());
        assert_ne!(
            long.upstream_label(),
            OwnerKey::new("ns", "y".repeat(70)).upstream_label()
        );
    }
}

//! Integer ids for the revisions a pass compares ManifestWorks against, and which
//! revision a ManifestWork carries.

use std::collections::BTreeMap;

use hashbrown::HashMap;

use crate::hash::Digest;
use crate::revision::RevisionView;
use crate::work::WorkView;

/// A revision a ManifestWork carries: one the pass knows (an index into [`RevisionIds`]), or a
/// label naming a revision that is in no history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Carried<'a> {
    Known(usize),
    Unstored(&'a str),
}

/// Every revision a pass compares ManifestWorks against: the stored ones and the update
/// revision, by hash, and the stable revision even when history lost it. Indices let the
/// per-cluster comparisons be integer compares.
pub(super) struct RevisionIds {
    /// Hash and content digest; the digest is unknown only for a stable revision that is
    /// no longer stored.
    pub(super) list: Vec<(String, Option<Digest>)>,
    pub(super) by_hash: HashMap<String, usize>,
}

impl RevisionIds {
    pub(super) fn new(
        revisions: &[RevisionView],
        update: (&str, Digest),
        current: Option<&str>,
    ) -> Self {
        let mut digests: BTreeMap<&str, Digest> = revisions
            .iter()
            .map(|r| (r.hash.as_str(), r.digest))
            .collect();
        digests.insert(update.0, update.1);
        let mut list: Vec<(String, Option<Digest>)> = digests
            .into_iter()
            .map(|(h, d)| (h.to_string(), Some(d)))
            .collect();
        if let Some(c) = current
            && !list.iter().any(|(h, _)| h == c)
        {
            list.push((c.to_string(), None));
        }
        let by_hash = list
            .iter()
            .enumerate()
            .map(|(i, (h, _))| (h.clone(), i))
            .collect();
        Self { list, by_hash }
    }

    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    pub(super) fn id(&self, hash: &str) -> Option<usize> {
        self.by_hash.get(hash).copied()
    }

    pub(super) fn name(&self, id: usize) -> &str {
        &self.list[id].0
    }

    pub(super) fn digest(&self, id: usize) -> Option<Digest> {
        self.list[id].1
    }

    /// The first revision, by hash, with this content.
    pub(super) fn with_content(&self, digest: Digest) -> Option<usize> {
        self.list.iter().position(|(_, d)| *d == Some(digest))
    }

    /// The revision a ManifestWork carries: its label, or — for a ManifestWork written
    /// before revisions existed — the revision whose content its spec equals.
    pub(super) fn carried<'w>(&self, w: &'w WorkView) -> Option<Carried<'w>> {
        match w.hash() {
            Some(h) => Some(self.id(h).map_or(Carried::Unstored(h), Carried::Known)),
            None => self.with_content(w.spec_digest?).map(Carried::Known),
        }
    }
}

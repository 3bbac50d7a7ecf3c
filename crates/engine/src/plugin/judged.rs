//! The clusters a plugin judged SUCCEEDED on the revision it is judging, as the MWRS
//! status keeps them ([`PluginJudged`]): one bit per chosen cluster, in the order of
//! their names, sealed by the controller. A SUCCEEDED verdict is therefore never written
//! onto its ManifestWork (a rollout behind a plugin makes no more ManifestWork writes than
//! one without), yet a restarted replica asks none of those clusters again and the CLI
//! shows them judged. A record counts only for the revision it names, the very clusters
//! chosen now, the plugins named now and the ManifestWork generations the judged
//! clusters carry now ([`About`]), and only with the controller's seal (rules §12.2):
//! anything else is taken as no record, and the clusters are asked again.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use mwrs_api::mwrs::PluginJudged;
use sha2::{Digest as _, Sha256};

use crate::hash::Digest;
use crate::marks::{MarkPlace, Marks};

/// One bit per chosen cluster: judged SUCCEEDED or not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JudgedBits {
    bits: Vec<u8>,
    count: i64,
}

impl JudgedBits {
    /// No cluster judged, out of `clusters`.
    pub fn of(clusters: usize) -> Self {
        Self {
            bits: vec![0; clusters.div_ceil(8)],
            count: 0,
        }
    }

    /// Marks the `i`-th chosen cluster judged.
    pub fn set(&mut self, i: usize) {
        if let Some(byte) = self.bits.get_mut(i / 8) {
            let bit = 1 << (i % 8);
            if *byte & bit == 0 {
                *byte |= bit;
                self.count += 1;
            }
        }
    }

    /// Is the `i`-th chosen cluster judged?
    pub fn get(&self, i: usize) -> bool {
        self.bits
            .get(i / 8)
            .is_some_and(|b| b & (1 << (i % 8)) != 0)
    }

    /// How many clusters are judged.
    pub fn count(&self) -> i64 {
        self.count
    }

    /// The bits of `record` as written, unchecked (None: not base64, or its count is not
    /// the bits set).
    pub fn written(record: &PluginJudged) -> Option<Self> {
        let bits = STANDARD.decode(&record.clusters).ok()?;
        let count = bits.iter().map(|b| i64::from(b.count_ones())).sum();
        (count == record.count).then_some(Self { bits, count })
    }

    /// The status record of these bits about `revision`, `about` what [`About`] made of
    /// them, sealed for the MWRS `mwrs_uid`.
    pub fn record(
        &self,
        revision: &str,
        about: &Digest,
        marks: &Marks,
        mwrs_uid: &str,
    ) -> PluginJudged {
        let mut record = PluginJudged {
            revision: revision.to_string(),
            count: self.count,
            clusters: STANDARD.encode(&self.bits),
            about: about.to_hex(),
            seal: String::new(),
        };
        record.seal = marks.seal(place(mwrs_uid), &fields(&record));
        record
    }

    /// Does `record` vouch for these bits (read from it) about `revision` and `about`, as
    /// [`About`] finds them now?
    pub fn vouched(
        record: &PluginJudged,
        revision: &str,
        about: &Digest,
        marks: &Marks,
        mwrs_uid: &str,
    ) -> bool {
        record.revision == revision
            && record.about == about.to_hex()
            && marks.trusts(place(mwrs_uid), &fields(record), &record.seal)
    }
}

/// A record is about its MWRS, no cluster or ManifestWork in particular.
fn place(mwrs_uid: &str) -> MarkPlace<'_> {
    MarkPlace {
        mwrs_uid,
        cluster: "",
        work: "",
        work_uid: None,
        at_creation: false,
    }
}

fn fields(r: &PluginJudged) -> [&[u8]; 4] {
    [
        b"plugin-judged",
        r.revision.as_bytes(),
        r.about.as_bytes(),
        r.clusters.as_bytes(),
    ]
}

/// What a bitmap is about, built cluster by cluster in the order its bits index: each
/// chosen cluster's name, the ManifestWork generation of each judged one, and the plugin
/// each placementRef names.
pub struct About(Sha256);

impl About {
    pub fn new<'p>(plugins: impl IntoIterator<Item = Option<&'p str>>) -> Self {
        let mut h = Sha256::new();
        h.update(b"plugin-judged/v1");
        for p in plugins {
            field(&mut h, p.unwrap_or("").as_bytes());
        }
        field(&mut h, b"clusters");
        Self(h)
    }

    /// The next chosen cluster; `judged_at`: the generation of its ManifestWork when
    /// its bit is set.
    pub fn cluster(&mut self, name: &str, judged_at: Option<i64>) {
        field(&mut self.0, name.as_bytes());
        match judged_at {
            Some(g) => field(&mut self.0, &g.to_le_bytes()),
            None => field(&mut self.0, b""),
        }
    }

    pub fn finish(self) -> Digest {
        Digest(self.0.finalize().into())
    }
}

/// `bytes` with its length first, so that no two lists of fields hash alike.
fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marks::MarkKey;

    fn about(clusters: &[(&str, Option<i64>)]) -> Digest {
        let mut a = About::new([Some("judge")]);
        for (name, g) in clusters {
            a.cluster(name, *g);
        }
        a.finish()
    }

    fn sealed() -> Marks {
        Marks::sealed(MarkKey::new(&[7; 32]).unwrap())
    }

    #[test]
    fn bits_round_trip_through_their_record() {
        let mut bits = JudgedBits::of(10);
        for i in [0, 3, 9, 9] {
            bits.set(i);
        }
        assert_eq!(bits.count(), 3);
        assert!(bits.get(9) && !bits.get(8) && !bits.get(100));
        let at = about(&[("a", Some(1)), ("b", None)]);
        let record = bits.record("rev", &at, &sealed(), "uid");
        assert_eq!(JudgedBits::written(&record), Some(bits));
        assert!(JudgedBits::vouched(&record, "rev", &at, &sealed(), "uid"));
    }

    #[test]
    fn a_record_counts_only_for_its_revision_clusters_generations_and_seal() {
        let marks = sealed();
        let at = about(&[("a", Some(1)), ("b", None)]);
        let mut bits = JudgedBits::of(2);
        bits.set(0);
        let record = bits.record("rev", &at, &marks, "uid");
        let vouched = |r: &PluginJudged, rev, at: &Digest, marks: &Marks, uid| {
            JudgedBits::vouched(r, rev, at, marks, uid)
        };
        assert!(!vouched(&record, "other", &at, &marks, "uid"));
        assert!(!vouched(
            &record,
            "rev",
            &about(&[("a", Some(2)), ("b", None)]),
            &marks,
            "uid"
        ));
        assert!(!vouched(
            &record,
            "rev",
            &about(&[("a", Some(1)), ("c", None)]),
            &marks,
            "uid"
        ));
        assert!(!vouched(&record, "rev", &at, &marks, "another MWRS"));
        let other_key = Marks::sealed(MarkKey::new(&[8; 32]).unwrap());
        assert!(!vouched(&record, "rev", &at, &other_key, "uid"));
        // Written by hand: every bit set, no seal, or the seal of another record.
        let mut forged = record.clone();
        forged.clusters = STANDARD.encode([3u8]);
        forged.count = 2;
        assert!(!vouched(&forged, "rev", &at, &marks, "uid"));
        let unsealed = bits.record("rev", &at, &Marks::AsWritten, "uid");
        assert!(unsealed.seal.is_empty());
        assert!(!vouched(&unsealed, "rev", &at, &marks, "uid"));
        // A reader without a key takes it as written.
        assert!(vouched(&unsealed, "rev", &at, &Marks::AsWritten, "uid"));
    }

    #[test]
    fn a_count_that_is_not_the_bits_set_is_no_record() {
        let mut bits = JudgedBits::of(8);
        bits.set(1);
        let mut record = bits.record("rev", &about(&[]), &Marks::AsWritten, "uid");
        record.count = 5;
        assert_eq!(JudgedBits::written(&record), None);
        record.clusters = "not base64!".into();
        assert_eq!(JudgedBits::written(&record), None);
    }
}

//! Marks this controller leaves on ManifestWorks and later decides on (a rollout
//! plugin's final verdict, the digest of the spec a plugin returned), sealed so that
//! nobody else can write one (rules §12.2).
//!
//! Anyone allowed to patch ManifestWorks in a cluster namespace (the cluster's own work
//! agent is) can write annotations. A mark is therefore trusted only with a valid seal:
//! an HMAC-SHA256, under a key only the controller holds, over the mark and what it is
//! about (the MWRS's uid, the cluster, the ManifestWork's name and uid, and the mark's
//! own fields), so that a seal copied to another ManifestWork, MWRS or revision, or to a
//! ManifestWork deleted and made again under the same name, does not verify. A mark
//! without a valid seal is treated as absent: a verdict is asked for again, a spec is
//! written again.
//!
//! A seal names the key it was made with (`KEYID:TAG`), so that after a rotation the
//! previous key still vouches for its marks while the controller holds it (a grace the
//! controller bounds). A seal without a key id was made before seals named keys or
//! ManifestWork uids; it is checked as it was made (rules §12.6: an upgrade changes no
//! outcome).

use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};

use crate::work::WorkUid;

/// Shortest key accepted: the MAC's own output size.
pub const MIN_KEY_LEN: usize = 32;

/// The secret key marks are sealed with.
#[derive(Clone)]
pub struct MarkKey(Arc<[u8]>);

impl std::fmt::Debug for MarkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MarkKey(..)")
    }
}

impl PartialEq for MarkKey {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

/// Why bytes are not a key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a mark key needs at least {MIN_KEY_LEN} bytes, got {0}")]
pub struct ShortKey(pub usize);

impl MarkKey {
    pub fn new(bytes: &[u8]) -> Result<Self, ShortKey> {
        if bytes.len() < MIN_KEY_LEN {
            return Err(ShortKey(bytes.len()));
        }
        Ok(Self(Arc::from(bytes)))
    }

    /// A short public name of the key (8 hex digits of a digest of it), written in its
    /// seals so that a reader holding several keys knows which one to check with.
    pub fn id(&self) -> String {
        let d = Sha256::new()
            .chain_update(b"mwrs mark key id")
            .chain_update(&self.0)
            .finalize();
        d.iter().take(4).map(|b| format!("{b:02x}")).collect()
    }

    fn mac(&self, fields: &[&[u8]]) -> Hmac<Sha256> {
        // new_from_slice accepts any key length; the length was checked in `new`.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        for f in fields {
            // Length-prefixed: ("ab", "c") and ("a", "bc") seal differently.
            mac.update(&(f.len() as u64).to_be_bytes());
            mac.update(f);
        }
        mac
    }

    /// The seal over `fields`, in hex.
    pub fn seal(&self, fields: &[&[u8]]) -> String {
        let tag = self.mac(fields).finalize().into_bytes();
        tag.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Is `seal` this key's seal over `fields`? Compared in constant time.
    pub fn verifies(&self, fields: &[&[u8]], seal: &str) -> bool {
        let Some(tag) = from_hex(seal) else {
            return false;
        };
        self.mac(fields).verify_slice(&tag).is_ok()
    }
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The keys a controller holds: the one it seals with, and the one it sealed with before
/// a rotation, still believed until the controller drops it.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyRing {
    current: MarkKey,
    previous: Option<MarkKey>,
}

impl KeyRing {
    pub fn new(current: MarkKey) -> Self {
        Self {
            current,
            previous: None,
        }
    }

    /// This ring with `previous` believed too (a key the same as the current one is not
    /// kept twice).
    pub fn with_previous(mut self, previous: MarkKey) -> Self {
        self.previous = (previous != self.current).then_some(previous);
        self
    }

    pub fn current(&self) -> &MarkKey {
        &self.current
    }

    pub fn previous(&self) -> Option<&MarkKey> {
        self.previous.as_ref()
    }

    fn keys(&self) -> impl Iterator<Item = &MarkKey> {
        std::iter::once(&self.current).chain(self.previous.as_ref())
    }

    fn by_id(&self, id: &str) -> Option<&MarkKey> {
        self.keys().find(|k| k.id() == id)
    }
}

/// How a pass takes the marks it finds.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Marks {
    /// The controller: a mark counts only with a seal one of its keys verifies, and the
    /// marks it writes are sealed with the current one.
    Sealed(KeyRing),
    /// A reader that decides nothing and holds no key (the CLI, simulations): marks are
    /// taken as written, to show what the controller most likely decided. Marks planned
    /// here are never written.
    #[default]
    AsWritten,
}

/// What a mark is about: the ManifestWork it sits on and the MWRS that owns it.
#[derive(Clone, Copy, Debug)]
pub struct MarkPlace<'a> {
    pub mwrs_uid: &'a str,
    pub cluster: &'a str,
    pub work: &'a str,
    /// The ManifestWork's uid; None in a write that creates it (the server has not given
    /// one yet).
    pub work_uid: Option<WorkUid>,
    /// The ManifestWork is at the generation it was created with: a mark written in its
    /// create (which names no uid) counts. No later spec edit brings a ManifestWork back
    /// to that generation, and a ManifestWork made again gets its create's own marks.
    pub at_creation: bool,
}

impl Marks {
    /// Marks sealed with `key` alone.
    pub fn sealed(key: MarkKey) -> Self {
        Marks::Sealed(KeyRing::new(key))
    }

    /// The seal for `fields` about `place` (empty when there is no key).
    pub fn seal(&self, place: MarkPlace<'_>, fields: &[&[u8]]) -> String {
        match self {
            Marks::Sealed(ring) => {
                let key = ring.current();
                let uid = place.work_uid.map(|u| u.0);
                let tag = key.seal(&covered(&place, uid_bytes(&uid), fields));
                format!("{}:{tag}", key.id())
            }
            Marks::AsWritten => String::new(),
        }
    }

    /// Is a mark with `fields` about `place`, sealed with `seal`, to be believed?
    pub fn trusts(&self, place: MarkPlace<'_>, fields: &[&[u8]], seal: &str) -> bool {
        let Marks::Sealed(ring) = self else {
            return true;
        };
        let Some((id, tag)) = seal.split_once(':') else {
            let legacy = legacy_covered(&place, fields);
            return ring.keys().any(|k| k.verifies(&legacy, seal));
        };
        let Some(key) = ring.by_id(id) else {
            return false;
        };
        let uid = place.work_uid.map(|u| u.0);
        key.verifies(&covered(&place, uid_bytes(&uid), fields), tag)
            || (place.at_creation
                && uid.is_some()
                && key.verifies(&covered(&place, &[], fields), tag))
    }
}

fn uid_bytes(uid: &Option<[u8; 16]>) -> &[u8] {
    uid.as_ref().map_or(&[], |u| u.as_slice())
}

/// What a seal covers: a version tag, the place (with `work_uid`: empty when None) and
/// the mark's fields.
fn covered<'a>(place: &MarkPlace<'a>, work_uid: &'a [u8], fields: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let mut all = vec![
        b"v2".as_slice(),
        place.mwrs_uid.as_bytes(),
        place.cluster.as_bytes(),
        place.work.as_bytes(),
        work_uid,
    ];
    all.extend_from_slice(fields);
    all
}

/// What a seal without a key id covers (seals made before they named keys and uids).
fn legacy_covered<'a>(place: &MarkPlace<'a>, fields: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let mut all = vec![
        place.mwrs_uid.as_bytes(),
        place.cluster.as_bytes(),
        place.work.as_bytes(),
    ];
    all.extend_from_slice(fields);
    all
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn key(b: u8) -> MarkKey {
        MarkKey::new(&[b; 32]).unwrap()
    }

    const HERE: MarkPlace<'static> = MarkPlace {
        mwrs_uid: "uid-1",
        cluster: "c1",
        work: "ns.app",
        work_uid: Some(WorkUid([1; 16])),
        at_creation: false,
    };

    #[test]
    fn a_seal_verifies_only_under_its_key_place_and_fields() {
        let marks = Marks::sealed(key(1));
        let fields: [&[u8]; 2] = [b"rev-a", b"SUCCEEDED"];
        let seal = marks.seal(HERE, &fields);
        assert_eq!(seal.len(), 8 + 1 + 64, "{seal}");
        assert!(marks.trusts(HERE, &fields, &seal));
        assert!(
            !Marks::sealed(key(2)).trusts(HERE, &fields, &seal),
            "another key"
        );
        assert!(
            !marks.trusts(HERE, &[b"rev-a", b"FAILED"], &seal),
            "another field"
        );
        assert!(
            !marks.trusts(HERE, &[b"rev-aS", b"UCCEEDED"], &seal),
            "shifted"
        );
        let elsewhere = MarkPlace {
            cluster: "c2",
            ..HERE
        };
        assert!(!marks.trusts(elsewhere, &fields, &seal), "copied to c2");
        let recreated = MarkPlace {
            mwrs_uid: "uid-2",
            ..HERE
        };
        assert!(!marks.trusts(recreated, &fields, &seal), "another MWRS");
        for forged in ["", "zz", &seal[..70], &"0".repeat(64), &seal[9..]] {
            assert!(!marks.trusts(HERE, &fields, forged), "{forged:?}");
        }
    }

    /// Security review K3: a ManifestWork deleted and made again under the same name is
    /// another place; a seal made in the write that created it (no uid yet) counts only
    /// while it is at its first generation.
    #[test]
    fn a_seal_names_the_manifestwork_not_only_its_name() {
        let marks = Marks::sealed(key(1));
        let fields: [&[u8]; 1] = [b"SUCCEEDED"];
        let seal = marks.seal(HERE, &fields);
        let made_again = MarkPlace {
            work_uid: Some(WorkUid([2; 16])),
            ..HERE
        };
        assert!(!marks.trusts(made_again, &fields, &seal));
        assert!(
            !marks.trusts(
                MarkPlace {
                    at_creation: true,
                    ..made_again
                },
                &fields,
                &seal
            ),
            "a seal about a uid is no create's"
        );
        let in_create = MarkPlace {
            work_uid: None,
            ..HERE
        };
        let created = marks.seal(in_create, &fields);
        assert!(marks.trusts(
            MarkPlace {
                at_creation: true,
                ..HERE
            },
            &fields,
            &created
        ));
        assert!(
            !marks.trusts(HERE, &fields, &created),
            "past its first generation"
        );
    }

    /// Security review K2: a seal names its key; after a rotation the previous key still
    /// vouches for its marks while the ring holds it, and a seal made before seals named
    /// keys and uids is checked as it was made.
    #[test]
    fn a_rotation_keeps_the_previous_keys_marks_while_it_is_held() {
        let fields: [&[u8]; 1] = [b"SUCCEEDED"];
        let old = Marks::sealed(key(1)).seal(HERE, &fields);
        let rotated = Marks::Sealed(KeyRing::new(key(2)).with_previous(key(1)));
        assert!(rotated.trusts(HERE, &fields, &old));
        let new = rotated.seal(HERE, &fields);
        assert!(new.starts_with(&format!("{}:", key(2).id())), "{new}");
        assert!(!Marks::sealed(key(1)).trusts(HERE, &fields, &new));
        assert!(
            !Marks::sealed(key(2)).trusts(HERE, &fields, &old),
            "dropped"
        );
        let forged_id = format!("{}:{}", key(2).id(), &old[9..]);
        assert!(!rotated.trusts(HERE, &fields, &forged_id));

        let legacy = key(1).seal(&[b"uid-1", b"c1", b"ns.app", b"SUCCEEDED"]);
        assert!(rotated.trusts(HERE, &fields, &legacy));
        assert!(!rotated.trusts(
            MarkPlace {
                cluster: "c2",
                ..HERE
            },
            &fields,
            &legacy
        ));
        assert!(!Marks::sealed(key(3)).trusts(HERE, &fields, &legacy));
    }

    #[test]
    fn a_reader_without_a_key_takes_marks_as_written() {
        assert!(Marks::AsWritten.trusts(HERE, &[b"x"], ""));
        assert_eq!(Marks::AsWritten.seal(HERE, &[b"x"]), "");
    }

    #[test]
    fn a_short_key_is_refused() {
        assert_eq!(MarkKey::new(&[0; 16]).unwrap_err(), ShortKey(16));
    }
}

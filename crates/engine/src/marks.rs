//! Marks this controller leaves on ManifestWorks and later decides on (a rollout
//! plugin's final verdict, the digest of the spec a plugin returned), sealed so that
//! nobody else can write one (SPEC §12.2).
//!
//! Anyone allowed to patch ManifestWorks in a cluster namespace (the cluster's own work
//! agent is) can write annotations. A mark is therefore trusted only with a valid seal:
//! an HMAC-SHA256, under a key only the controller holds, over the mark and what it is
//! about (the MWRS's uid, the cluster, the ManifestWork's name, and the mark's own
//! fields), so that a seal copied to another ManifestWork, MWRS or revision does not
//! verify. A mark without a valid seal is treated as absent: a verdict is asked for
//! again, a spec is written again.

use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;

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

/// How a pass takes the marks it finds.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Marks {
    /// The controller: a mark counts only with a seal `key` verifies, and the marks it
    /// writes are sealed with it.
    Sealed(MarkKey),
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
}

impl Marks {
    /// The seal for `fields` about `place` (empty when there is no key).
    pub fn seal(&self, place: MarkPlace<'_>, fields: &[&[u8]]) -> String {
        match self {
            Marks::Sealed(key) => key.seal(&with_place(place, fields)),
            Marks::AsWritten => String::new(),
        }
    }

    /// Is a mark with `fields` about `place`, sealed with `seal`, to be believed?
    pub fn trusts(&self, place: MarkPlace<'_>, fields: &[&[u8]], seal: &str) -> bool {
        match self {
            Marks::Sealed(key) => key.verifies(&with_place(place, fields), seal),
            Marks::AsWritten => true,
        }
    }
}

fn with_place<'a>(place: MarkPlace<'a>, fields: &[&'a [u8]]) -> Vec<&'a [u8]> {
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
    };

    #[test]
    fn a_seal_verifies_only_under_its_key_place_and_fields() {
        let marks = Marks::Sealed(key(1));
        let fields: [&[u8]; 2] = [b"rev-a", b"SUCCEEDED"];
        let seal = marks.seal(HERE, &fields);
        assert_eq!(seal.len(), 64);
        assert!(marks.trusts(HERE, &fields, &seal));
        assert!(
            !Marks::Sealed(key(2)).trusts(HERE, &fields, &seal),
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
        for forged in ["", "zz", &seal[..62], &"0".repeat(64)] {
            assert!(!marks.trusts(HERE, &fields, forged), "{forged:?}");
        }
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

//! Revision identity: the canonical JSON of a ManifestWork template, the FNV-1a name hash
//! (rules §4) and the content digest used to decide "same content".
//!
//! The name hash is short and can collide; equality of content is always decided on the
//! SHA-256 digest of the same canonical bytes, never on the name hash.

use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// Characters a revision hash is spelled with (Kubernetes' "safe encode" alphabet).
const ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";
const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

/// Canonical JSON: object keys sorted by their UTF-8 bytes, no whitespace, strings
/// escaped as serde_json escapes them, numbers as serde_json prints them.
///
/// Keys are sorted here rather than relying on `serde_json::Map` ordering, because any
/// crate in the build may switch on serde_json's `preserve_order`.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::with_capacity(256);
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                if let Some(val) = map.get(k) {
                    write_canonical(val, out);
                }
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    // serde_json cannot fail on a &str; the fallback keeps this total anyway.
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

/// The canonical JSON of a document read straight from a deserializer, byte for byte what
/// [`canonical_json`] gives for the same document, without building a [`Value`] tree: a
/// watched ManifestWork's spec (its manifests) becomes one string, then a digest, while
/// the object is decoded. Of a key repeated in one object the last value counts, as
/// `serde_json` does.
pub struct CanonicalJson(pub String);

impl<'de> serde::Deserialize<'de> for CanonicalJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CanonicalVisitor).map(CanonicalJson)
    }
}

struct CanonicalVisitor;

impl<'de> serde::de::Visitor<'de> for CanonicalVisitor {
    type Value = String;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<String, E> {
        Ok("null".into())
    }
    fn visit_none<E>(self) -> Result<String, E> {
        Ok("null".into())
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E>(self, b: bool) -> Result<String, E> {
        Ok(if b { "true" } else { "false" }.into())
    }
    fn visit_i64<E>(self, n: i64) -> Result<String, E> {
        Ok(serde_json::Number::from(n).to_string())
    }
    fn visit_u64<E>(self, n: u64) -> Result<String, E> {
        Ok(serde_json::Number::from(n).to_string())
    }
    fn visit_f64<E>(self, n: f64) -> Result<String, E> {
        // Non-finite numbers cannot come from JSON; `Value` would hold them as null.
        Ok(serde_json::Number::from_f64(n).map_or_else(|| "null".into(), |n| n.to_string()))
    }
    fn visit_str<E>(self, s: &str) -> Result<String, E> {
        let mut out = String::with_capacity(s.len() + 2);
        write_string(s, &mut out);
        Ok(out)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
        let mut out = String::from("[");
        while let Some(CanonicalJson(item)) = seq.next_element()? {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&item);
        }
        out.push(']');
        Ok(out)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        let mut entries: Vec<(String, String)> = Vec::new();
        while let Some((k, CanonicalJson(v))) = map.next_entry::<String, CanonicalJson>()? {
            entries.push((k, v));
        }
        // Stable sort, then keep the last of equal keys.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = String::from("{");
        for (i, (k, v)) in entries.iter().enumerate() {
            if entries.get(i + 1).is_some_and(|next| next.0 == *k) {
                continue;
            }
            if out.len() > 1 {
                out.push(',');
            }
            write_string(k, &mut out);
            out.push(':');
            out.push_str(v);
        }
        out.push('}');
        Ok(out)
    }
}

/// 32-bit FNV-1a.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(FNV_OFFSET, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(FNV_PRIME)
    })
}

fn fnv1a32_continue(mut h: u32, bytes: &[u8]) -> u32 {
    for b in bytes {
        h = (h ^ u32::from(*b)).wrapping_mul(FNV_PRIME);
    }
    h
}

/// Spells the decimal digits of `n` through [`ALPHABET`] (digit d → ALPHABET[ord(d) % 27]).
pub fn safe_encode(n: u32) -> String {
    n.to_string()
        .bytes()
        .map(|d| char::from(ALPHABET[usize::from(d) % ALPHABET.len()]))
        .collect()
}

/// The revision hash of a template (rules §4, §10.10): FNV-1a over the canonical JSON,
/// then — only when `collision_count > 0` — the count as little-endian u32 and 4 zero
/// bytes.
pub fn revision_hash(template: &Value, collision_count: i32) -> String {
    revision_hash_of_canonical(&canonical_json(template), collision_count)
}

pub fn revision_hash_of_canonical(canonical: &str, collision_count: i32) -> String {
    let mut h = fnv1a32(canonical.as_bytes());
    if collision_count > 0 {
        let count = u32::try_from(collision_count).unwrap_or(0);
        h = fnv1a32_continue(h, &count.to_le_bytes());
        h = fnv1a32_continue(h, &[0u8; 4]);
    }
    safe_encode(h)
}

/// Content identity of a template: SHA-256 of its canonical JSON.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in &self.0[..6] {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl Digest {
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The digest [`Digest::to_hex`] wrote (None: not one).
    pub fn from_hex(s: &str) -> Option<Self> {
        if s.len() != 64 || !s.is_ascii() {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Self(out))
    }
}

pub fn digest(template: &Value) -> Digest {
    digest_of_canonical(&canonical_json(template))
}

pub fn digest_of_canonical(canonical: &str) -> Digest {
    Digest(Sha256::digest(canonical.as_bytes()).into())
}

/// Hex of the first `n` bytes of SHA-256 of `s` (names and hashed owner labels).
pub fn sha256_hex(s: &str, n: usize) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .take(n)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_keys_and_drops_whitespace() {
        let v = json!({"b": 1, "a": {"d": [true, null, "x\"y"], "c": 1.5}, "é": "ü"});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":1.5,"d":[true,null,"x\"y"]},"b":1,"é":"ü"}"#
        );
    }

    #[test]
    fn canonical_is_independent_of_input_order() {
        let a: Value = serde_json::from_str(r#"{"x":1,"y":{"q":2,"p":3}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{ "y": {"p":3, "q":2}, "x": 1 }"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(revision_hash(&a, 0), revision_hash(&b, 0));
        assert_eq!(digest(&a), digest(&b));
    }

    #[test]
    fn canonical_read_from_text_matches_canonical_of_the_value() {
        let texts = [
            r#"{"b": 1, "a": {"d": [true, null, "x\"y\u00e9"], "c": 1.5}, "é": "ü"}"#,
            r#"{"n": [-3, 18446744073709551615, 1e3, 0.1, -0.0, 2.50], "e": {}, "l": []}"#,
            r#"{"k": 1, "k": {"z": 2}, "a": "\n\t\u0001"}"#,
            r#"[{"y": 1, "x": [{"q": null}]}, "s", 7]"#,
        ];
        for text in texts {
            let value: Value = serde_json::from_str(text).unwrap();
            let read: CanonicalJson = serde_json::from_str(text).unwrap();
            assert_eq!(read.0, canonical_json(&value), "{text}");
        }
    }

    // Golden vectors: FNV-1a 32 reference values (from the FNV specification's test
    // suite) and hashes computed independently (Python, see the comment of each).
    #[test]
    fn fnv1a32_reference_vectors() {
        assert_eq!(fnv1a32(b""), 0x811c9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9cf968);
    }

    #[test]
    fn safe_encode_maps_digits() {
        assert_eq!(safe_encode(0), "4");
        assert_eq!(safe_encode(1_234_567_890), "56789bcdf4");
    }

    #[test]
    fn revision_hash_golden() {
        assert_eq!(fnv1a32(b"{}"), 1_415_952_421);
        assert_eq!(revision_hash(&json!({}), 0), safe_encode(1_415_952_421));
        assert_eq!(revision_hash(&json!({}), 0), "5859f96865");
        assert_eq!(
            revision_hash(&json!({"é": "ü", "a": [1, 2.5]}), 0),
            "77c47497f9"
        );
        let t = json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}, "data": {"k": "v"}}]}});
        assert_eq!(revision_hash(&t, 0), GOLDEN_CM);
        assert_eq!(revision_hash(&t, 1), GOLDEN_CM_COLLISION_1);
        assert_ne!(revision_hash(&t, 0), revision_hash(&t, 1));
        assert!(
            revision_hash(&t, 7)
                .chars()
                .all(|c| "456789bcdf".contains(c))
        );
    }

    // Computed by scripts/golden-hash.py, an independent implementation.
    const GOLDEN_CM: &str = "76cb8ddb9d";
    const GOLDEN_CM_COLLISION_1: &str = "845979fcf9";
}

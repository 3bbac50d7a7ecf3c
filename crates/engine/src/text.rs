//! Text the controller writes into bounded fields (condition messages, annotations,
//! Event notes, object names): cut to a length in bytes at a character boundary.

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn prefix(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` cut to at most `max` bytes, with an ellipsis when cut.
pub fn cut(mut s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    const MORE: &str = "…";
    let end = prefix(&s, max.saturating_sub(MORE.len())).len();
    s.truncate(end);
    s.push_str(MORE);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_boundary() {
        assert_eq!(prefix("héllo", 2), "h", "é is two bytes");
        assert_eq!(prefix("abc", 10), "abc");
        assert_eq!(cut("short".into(), 256), "short");
        let c = cut("é".repeat(300), 256);
        assert!(c.len() <= 256 && c.ends_with('…'), "{}", c.len());
    }
}

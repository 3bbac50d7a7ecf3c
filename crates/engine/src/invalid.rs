//! The one error shape of the engine: a field of the user's input that cannot be acted
//! on, with the reason. It becomes a status condition; it never panics or deletes.

use std::fmt;

/// A field path (`spec.placementRefs[0].rolloutStrategy.progressive.maxConcurrency`) and
/// why its value is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Invalid {
    pub field: String,
    pub reason: String,
}

impl Invalid {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Prefixes the field path, so inner parsers can name their own sub-field only.
    pub fn within(mut self, parent: &str) -> Self {
        if self.field.is_empty() {
            self.field = parent.to_string();
        } else if !parent.is_empty() {
            self.field = format!("{parent}.{}", self.field);
        }
        self
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

//! Stage 2, manual controls: abort and retry requests, each acted on once.

use super::*;

impl<'a> Pass<'a> {
    /// Has the annotation `key` a value not handled yet? Records it as handled.
    pub(super) fn take_request(&self, key: &str, handled: &mut Option<String>) -> bool {
        let value = self
            .o
            .mwrs
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key));
        match value {
            Some(v) if handled.as_ref() != Some(v) => {
                *handled = Some(v.clone());
                true
            }
            _ => false,
        }
    }
}

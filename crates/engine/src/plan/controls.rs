//! Stage 2, manual controls (rules §7, §10.5): the abort and retry requests, each acted on
//! once, and the pause. A request that names another revision than the update revision
//! is read and answered, and does nothing.

use mwrs_api::labels;
use mwrs_api::mwrs::HandledControls;

use crate::phase;

use super::output::{EVENT_ABORT_REQUESTED, EVENT_RETRY_REQUESTED, PlannedEvent};
use super::pass::Pass;

/// What the manual controls ask of this pass.
pub(super) struct Controls {
    /// The requests handled so far, this pass's included.
    pub(super) handled: HandledControls,
    /// A new abort request for the update revision.
    pub(super) abort: bool,
    /// A new retry request for the update revision: it ends the hold of an abort.
    pub(super) retry: bool,
    pub(super) paused: bool,
    /// One per request read, acted on or not, so a user sees it was read (once).
    pub(super) events: Vec<PlannedEvent>,
}

/// A new request's token: its value, and the revision it names if that is not `update`.
struct Request {
    elsewhere: Option<String>,
}

impl<'a> Pass<'a> {
    /// Stage 2. `held`: an abort holds the update revision before this pass's retry.
    pub(super) fn controls(&self, update: &str, held: bool) -> Controls {
        let mut handled = self.old.handled_controls.clone().unwrap_or_default();
        let abort = self.take_request(labels::CONTROL_ABORT, &mut handled.abort, update);
        let retry = self.take_request(labels::CONTROL_RETRY, &mut handled.retry, update);
        let mut events = Vec::new();
        if let Some(r) = &retry {
            events.push(PlannedEvent {
                reason: EVENT_RETRY_REQUESTED.into(),
                message: match (&r.elsewhere, held) {
                    (Some(other), _) => format!(
                        "retry requested for revision {other}, which is no longer the update \
                         revision ({update} is); nothing to do"
                    ),
                    (None, true) => format!("retry requested: revision {update} rolls out again"),
                    (None, false) => {
                        format!("retry requested: no abort holds revision {update}; nothing to do")
                    }
                },
                warning: false,
            });
        }
        if let Some(r) = &abort {
            events.push(PlannedEvent {
                reason: EVENT_ABORT_REQUESTED.into(),
                message: match (&r.elsewhere, &self.old.current_revision) {
                    (Some(other), _) => format!(
                        "abort requested for revision {other}, which is no longer the update \
                         revision ({update} is); nothing to abort"
                    ),
                    (None, Some(c)) if c == update => format!(
                        "abort requested: revision {update} is the stable revision; nothing to abort"
                    ),
                    (None, _) => format!("abort requested for revision {update}"),
                },
                warning: true,
            });
        }
        Controls {
            handled,
            abort: abort.is_some_and(|r| r.elsewhere.is_none()),
            retry: retry.is_some_and(|r| r.elsewhere.is_none()),
            paused: phase::is_paused(self.observed.mwrs),
            events,
        }
    }

    /// A new request under annotation `key` (a value not handled yet), recorded as
    /// handled.
    fn take_request(
        &self,
        key: &str,
        handled: &mut Option<String>,
        update: &str,
    ) -> Option<Request> {
        let value = phase::annotation(self.observed.mwrs, key)?;
        if handled.as_deref() == Some(value) {
            return None;
        }
        *handled = Some(value.to_string());
        Some(Request {
            elsewhere: labels::requested_revision(value)
                .filter(|r| *r != update)
                .map(str::to_string),
        })
    }
}

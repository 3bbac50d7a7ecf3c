//! Errors of the CLI, each with the exit code it ends the process with.

use std::fmt;

/// Process exit codes (documented in `--help` and the README: [`crate::args::EXIT_CODES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    Ok = 0,
    Error = 1,
    Usage = 2,
    Degraded = 3,
    Aborted = 4,
    Timeout = 5,
    NotFound = 6,
    Conflict = 7,
    Unreachable = 8,
    Forbidden = 9,
    Blocked = 10,
}

/// A failure to report on stderr, and the exit code.
#[derive(Debug)]
pub struct CliError {
    pub code: Exit,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, CliError>;

impl CliError {
    pub fn new(code: Exit, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Self::new(Exit::Error, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Exit::NotFound, message)
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    /// A hub API error, with `what` saying what was being done.
    pub fn kube(what: &str, e: kube::Error) -> Self {
        match &e {
            kube::Error::Api(s) => {
                let code = match s.code {
                    404 => Exit::NotFound,
                    409 => Exit::Conflict,
                    401 => Exit::Unreachable,
                    403 => Exit::Forbidden,
                    _ => Exit::Error,
                };
                let msg = if s.message.is_empty() {
                    s.reason.clone()
                } else {
                    s.message.clone()
                };
                if code == Exit::Forbidden {
                    return Self::new(code, format!("{what}: forbidden: {msg}"));
                }
                Self::new(code, format!("{what}: {msg}"))
            }
            // Anything before an HTTP answer: connection refused, DNS, TLS, timeouts.
            _ => Self::new(
                Exit::Unreachable,
                format!("{what}: cannot reach the hub: {}", error_chain(&e)),
            ),
        }
    }
}

/// An error and its sources on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

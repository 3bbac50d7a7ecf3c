//! The plugin's configuration file:
//!
//! ```yaml
//! listen: 0.0.0.0:10843
//! tls: {certFile: /etc/tls/tls.crt, keyFile: /etc/tls/tls.key}   # off loopback: required
//! #   clientCaFile: /etc/tls/client-ca.crt   # optional: answer only callers it signed
//! read: Watch      # or Get: a GET per question (needs `get` only, not `list`/`watch`)
//! checks:
//!   - resource: {group: apps, resource: deployments, namespace: web, name: web}
//!     succeedWhen: ReadyReplicas == Replicas
//!     failWhen: ReadyReplicas < 1          # optional; judged once the soak is over
//!     soak: 30s                            # optional; default 0
//! ```
//!
//! A cluster succeeds when every check's resource reports feedback for which `succeedWhen`
//! holds, and has for its `soak` since the agent reported the revision done. It fails
//! when a `failWhen` holds after the soak. Anything else is IN_PROGRESS.

use std::net::SocketAddr;
use std::path::PathBuf;

use jiff::SignedDuration;
use serde::Deserialize;

use crate::expr::Expr;

#[derive(Debug)]
pub struct Config {
    pub listen: SocketAddr,
    pub tls: Option<Tls>,
    pub checks: Vec<Check>,
    pub read: Read,
}

/// How ManifestWorks are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum Read {
    /// A watch of every ManifestWork (needs `list` and `watch`), and a GET of the one
    /// asked about when the watched copy does not say SUCCEEDED.
    #[default]
    Watch,
    /// A GET per question (needs `get` only).
    Get,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tls {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// Require callers to present a certificate this CA signed (the controller's
    /// `clientCertificate` in its work config): no one else gets an answer.
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
}

/// Which manifest of the ManifestWork a check reads (its `resourceMeta`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resource {
    #[serde(default)]
    pub group: String,
    pub resource: String,
    #[serde(default)]
    pub namespace: String,
    pub name: String,
}

#[derive(Debug)]
pub struct Check {
    pub resource: Resource,
    pub succeed_when: Expr,
    pub fail_when: Option<Expr>,
    pub soak: SignedDuration,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Raw {
    listen: String,
    #[serde(default)]
    tls: Option<Tls>,
    checks: Vec<RawCheck>,
    #[serde(default)]
    read: Read,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawCheck {
    resource: Resource,
    succeed_when: String,
    #[serde(default)]
    fail_when: Option<String>,
    #[serde(default)]
    soak: Option<String>,
}

impl Config {
    /// Parses the file; an error names the field and why.
    pub fn parse(yaml: &str) -> Result<Self, String> {
        let raw: Raw = serde_saphyr::from_str(yaml).map_err(|e| format!("(file): {e}"))?;
        let listen: SocketAddr = raw
            .listen
            .parse()
            .map_err(|e| format!("listen: {:?}: {e}", raw.listen))?;
        if raw.tls.is_none() && !listen.ip().is_loopback() {
            return Err(format!(
                "tls: is required to listen on {listen}: plaintext is for the loopback interface only"
            ));
        }
        if raw.checks.is_empty() {
            return Err("checks: at least one check is needed".into());
        }
        let checks = raw
            .checks
            .into_iter()
            .enumerate()
            .map(|(i, c)| check(i, c))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            listen,
            tls: raw.tls,
            checks,
            read: raw.read,
        })
    }
}

fn check(i: usize, c: RawCheck) -> Result<Check, String> {
    let field = |f: &str| format!("checks[{i}].{f}");
    let succeed_when =
        Expr::parse(&c.succeed_when).map_err(|e| format!("{}: {e}", field("succeedWhen")))?;
    let fail_when = c
        .fail_when
        .as_deref()
        .map(Expr::parse)
        .transpose()
        .map_err(|e| format!("{}: {e}", field("failWhen")))?;
    let soak = match c.soak.as_deref() {
        None => SignedDuration::ZERO,
        Some(s) => mwrs_duration::parse_go_duration(s)
            .ok()
            .filter(|d| !d.is_negative())
            .ok_or_else(|| format!("{}: {s:?} is not a duration (30s, 5m)", field("soak")))?,
    };
    Ok(Check {
        resource: c.resource,
        succeed_when,
        fail_when,
        soak,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_parses_and_each_broken_rule_names_its_field() {
        let good = "listen: 127.0.0.1:10843\nchecks:\n  - resource: {group: apps, resource: deployments, namespace: web, name: web}\n    succeedWhen: ReadyReplicas == Replicas\n    soak: 5s\n";
        let c = Config::parse(good).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.checks[0].soak, SignedDuration::from_secs(5));
        let cases = [
            (good.replace("127.0.0.1", "0.0.0.0"), "tls:"),
            (
                good.replace("ReadyReplicas == Replicas", "ReadyReplicas"),
                "checks[0].succeedWhen:",
            ),
            (good.replace("5s", "soon"), "checks[0].soak:"),
            (good.replace("10843", "x"), "listen:"),
        ];
        for (yaml, field) in cases {
            let e = Config::parse(&yaml).err().unwrap_or_default();
            assert!(e.starts_with(field), "{field}: {e}");
        }
    }
}

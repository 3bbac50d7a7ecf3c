//! `--work-config`: the file that registers rollout plugins, in the shape of OCM's
//! `work-controller-config` ConfigMap (enhancement 231):
//!
//! ```yaml
//! plugins:
//!   - name: smoke-tests
//!     endpoint: smoke-tests.mwrs-system.svc:10843
//!     caCertificate:
//!       caBundle: LS0tLS1CRUdJTi...   # base64 of the PEM CA that signed its certificate
//!     clientCertificate:               # optional: the controller's identity to it (mTLS)
//!       certFile: /etc/mwrs/plugin-client/tls.crt
//!       keyFile: /etc/mwrs/plugin-client/tls.key
//!     namespaces: [team-a, team-b]     # optional: only MWRS of these namespaces use it
//!     allowManifestRemoval: false      # may its MutateManifestWork drop a manifest?
//!     failurePolicy:                   # what its failures cost a rollout (rules §12.3)
//!       policy: Fail                   # Fail (default) or Hold
//!       consecutiveErrors: 4           # errors in a row about one cluster
//!       unavailableFor: 5m             # unreachable this long
//! ```
//!
//! Every plugin is reached over TLS and verified against its CA bundle. The one exception
//! is a sidecar on the loopback interface, which may be named `http://127.0.0.1:PORT`.
//! A file that breaks a rule is refused whole, naming the field and why.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use serde::Deserialize;

/// The parsed file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkConfig {
    pub plugins: Vec<PluginConfig>,
}

/// One registered plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginConfig {
    pub name: String,
    /// `https://host:port` or, on loopback only, `http://host:port`.
    pub uri: String,
    /// The host name its certificate must carry (None: plaintext on loopback).
    pub tls_domain: Option<String>,
    /// PEM of the CA its certificate must chain to.
    pub ca_pem: Option<Vec<u8>>,
    /// Its MutateManifestWork may return a spec without a manifest the template has.
    pub allow_manifest_removal: bool,
    pub failure_policy: FailurePolicyConfig,
    /// The certificate and key (PEM files) the controller presents to it.
    pub client_certificate: Option<ClientCertificate>,
    /// The namespaces whose MWRS may use it (None: every namespace).
    pub namespaces: Option<BTreeSet<String>>,
}

impl PluginConfig {
    /// May an MWRS of `namespace` use this plugin?
    pub fn serves(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|n| n.contains(namespace))
    }
}

/// The controller's client certificate for one plugin: PEM files, read when the
/// controller starts.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientCertificate {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// What a plugin's failures cost a rollout: past `consecutive_errors` in a row about one
/// cluster, or `unavailable_for` unreachable, a held cluster counts as failed, or stays
/// held with `hold`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailurePolicyConfig {
    pub hold: bool,
    pub consecutive_errors: u32,
    pub unavailable_for: Duration,
}

impl Default for FailurePolicyConfig {
    /// Fail, after 4 errors in a row (as Argo Rollouts' `consecutiveErrorLimit`) or 5
    /// minutes unreachable.
    fn default() -> Self {
        Self {
            hold: false,
            consecutive_errors: 4,
            unavailable_for: Duration::from_secs(300),
        }
    }
}

/// Why the file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{field}: {reason}")]
pub struct ConfigError {
    pub field: String,
    pub reason: String,
}

fn refuse(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        reason: reason.into(),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    plugins: Vec<RawPlugin>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawPlugin {
    #[serde(default)]
    name: String,
    #[serde(default)]
    endpoint: String,
    #[serde(default)]
    ca_certificate: Option<RawCa>,
    #[serde(default)]
    allow_manifest_removal: bool,
    #[serde(default)]
    failure_policy: Option<RawFailurePolicy>,
    #[serde(default)]
    client_certificate: Option<ClientCertificate>,
    #[serde(default)]
    namespaces: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawFailurePolicy {
    #[serde(default)]
    policy: Option<String>,
    #[serde(default)]
    consecutive_errors: Option<u32>,
    #[serde(default)]
    unavailable_for: Option<String>,
}

impl RawFailurePolicy {
    fn parse(self, field: &str) -> Result<FailurePolicyConfig, ConfigError> {
        let default = FailurePolicyConfig::default();
        let hold = match self.policy.as_deref() {
            None | Some("Fail") => false,
            Some("Hold") => true,
            Some(other) => {
                return Err(refuse(
                    format!("{field}.policy"),
                    format!("{other:?} is not Fail or Hold"),
                ));
            }
        };
        let consecutive_errors = match self.consecutive_errors {
            Some(0) => {
                return Err(refuse(
                    format!("{field}.consecutiveErrors"),
                    "must be 1 or more",
                ));
            }
            n => n.unwrap_or(default.consecutive_errors),
        };
        let unavailable_for = match self.unavailable_for.as_deref() {
            None => default.unavailable_for,
            Some(d) => parse_duration(d).filter(|d| !d.is_zero()).ok_or_else(|| {
                refuse(
                    format!("{field}.unavailableFor"),
                    format!("{d:?} is not a positive duration such as 30s, 5m or 1h30m"),
                )
            })?,
        };
        Ok(FailurePolicyConfig {
            hold,
            consecutive_errors,
            unavailable_for,
        })
    }
}

/// A duration as Go writes one (`1h30m`, `90s`, `1.5m`), not negative: the project's one
/// reader of Go durations ([`mwrs_duration::parse_go_duration`]).
fn parse_duration(s: &str) -> Option<Duration> {
    let d = mwrs_duration::parse_go_duration(s).ok()?;
    Duration::try_from(d).ok()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawCa {
    #[serde(default)]
    ca_bundle: String,
}

impl WorkConfig {
    /// Parses the file's YAML.
    pub fn parse(yaml: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig =
            serde_saphyr::from_str(yaml).map_err(|e| refuse("(file)", e.to_string()))?;
        let mut names = BTreeSet::new();
        let mut plugins = Vec::with_capacity(raw.plugins.len());
        for (i, p) in raw.plugins.into_iter().enumerate() {
            let field = format!("plugins[{i}]");
            let plugin = PluginConfig::from_raw(p, &field)?;
            if !names.insert(plugin.name.clone()) {
                return Err(refuse(
                    format!("{field}.name"),
                    format!("{:?} is registered twice", plugin.name),
                ));
            }
            plugins.push(plugin);
        }
        Ok(Self { plugins })
    }

    pub fn plugin(&self, name: &str) -> Option<&PluginConfig> {
        self.plugins.iter().find(|p| p.name == name)
    }
}

impl PluginConfig {
    fn from_raw(p: RawPlugin, field: &str) -> Result<Self, ConfigError> {
        if !is_label(&p.name) {
            return Err(refuse(
                format!("{field}.name"),
                format!(
                    "{:?} is not a plugin name: lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit",
                    p.name
                ),
            ));
        }
        let endpoint =
            Endpoint::parse(&p.endpoint).map_err(|r| refuse(format!("{field}.endpoint"), r))?;
        let ca_pem = p
            .ca_certificate
            .map(|ca| decode_bundle(&ca.ca_bundle))
            .transpose()
            .map_err(|r| refuse(format!("{field}.caCertificate.caBundle"), r))?;
        if p.client_certificate.is_some() && !endpoint.tls {
            return Err(refuse(
                format!("{field}.clientCertificate"),
                "needs TLS: the endpoint is plaintext (http://)",
            ));
        }
        let namespaces = match p.namespaces {
            None => None,
            Some(list) => {
                if let Some(bad) = list.iter().find(|n| !is_label(n)) {
                    return Err(refuse(
                        format!("{field}.namespaces"),
                        format!("{bad:?} is not a namespace name"),
                    ));
                }
                Some(list.into_iter().collect())
            }
        };
        match (endpoint.tls, &ca_pem) {
            (true, None) => Err(refuse(
                format!("{field}.caCertificate"),
                "is required: the plugin is reached over TLS and verified against this CA",
            )),
            (false, Some(_)) => Err(refuse(
                format!("{field}.endpoint"),
                "is plaintext (http://) but a caCertificate is given: use https://",
            )),
            (tls, _) => Ok(Self {
                name: p.name,
                uri: endpoint.uri,
                tls_domain: tls.then_some(endpoint.host),
                ca_pem,
                allow_manifest_removal: p.allow_manifest_removal,
                failure_policy: p
                    .failure_policy
                    .map(|f| f.parse(&format!("{field}.failurePolicy")))
                    .transpose()?
                    .unwrap_or_default(),
                client_certificate: p.client_certificate,
                namespaces,
            }),
        }
    }
}

struct Endpoint {
    uri: String,
    host: String,
    tls: bool,
}

impl Endpoint {
    /// `host:port`, `https://host:port` or `http://LOOPBACK:port`.
    fn parse(s: &str) -> Result<Self, String> {
        let (tls, rest) = match s.split_once("://") {
            None => (true, s),
            Some(("https", rest)) => (true, rest),
            Some(("http", rest)) => (false, rest),
            Some((scheme, _)) => return Err(format!("scheme {scheme:?} is not https or http")),
        };
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("{s:?} has no port (host:port)"))?;
        if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(format!("{s:?} is not host:port"));
        }
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if !tls && !matches!(host.as_str(), "127.0.0.1" | "::1" | "localhost") {
            return Err(format!(
                "{s:?} is plaintext off the loopback interface: use https:// with a caCertificate"
            ));
        }
        let scheme = if tls { "https" } else { "http" };
        Ok(Self {
            uri: format!("{scheme}://{rest}"),
            host,
            tls,
        })
    }
}

fn decode_bundle(b64: &str) -> Result<Vec<u8>, String> {
    let compact: String = b64.split_whitespace().collect();
    let pem = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|e| format!("is not base64: {e}"))?;
    if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
        return Err("holds no PEM certificate".into());
    }
    Ok(pem)
}

fn is_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn bundle() -> String {
        base64::engine::general_purpose::STANDARD.encode(PEM)
    }

    #[test]
    fn the_designs_shape_parses() {
        let yaml = format!(
            "plugins:\n  - name: smoke\n    endpoint: smoke.mwrs-system.svc:10843\n    caCertificate:\n      caBundle: {}\n  - name: local\n    endpoint: http://127.0.0.1:9000\n",
            bundle()
        );
        let c = WorkConfig::parse(&yaml).unwrap();
        assert_eq!(
            c.plugins,
            [
                PluginConfig {
                    name: "smoke".into(),
                    uri: "https://smoke.mwrs-system.svc:10843".into(),
                    tls_domain: Some("smoke.mwrs-system.svc".into()),
                    ca_pem: Some(PEM.as_bytes().to_vec()),
                    allow_manifest_removal: false,
                    failure_policy: FailurePolicyConfig::default(),
                    client_certificate: None,
                    namespaces: None,
                },
                PluginConfig {
                    name: "local".into(),
                    uri: "http://127.0.0.1:9000".into(),
                    tls_domain: None,
                    ca_pem: None,
                    allow_manifest_removal: false,
                    failure_policy: FailurePolicyConfig::default(),
                    client_certificate: None,
                    namespaces: None,
                },
            ]
        );
        assert_eq!(WorkConfig::parse("{}").unwrap(), WorkConfig::default());
    }

    #[test]
    fn each_broken_rule_names_its_field() {
        let ca = format!("    caCertificate:\n      caBundle: {}\n", bundle());
        let cases = [
            ("plugins:\n  - name: Bad\n    endpoint: x:1\n".to_string(), "plugins[0].name"),
            (
                format!("plugins:\n  - name: a\n    endpoint: x:1\n{ca}  - name: a\n    endpoint: y:1\n{ca}"),
                "plugins[1].name",
            ),
            ("plugins:\n  - name: a\n    endpoint: x\n".into(), "plugins[0].endpoint"),
            ("plugins:\n  - name: a\n    endpoint: x:1\n".into(), "plugins[0].caCertificate"),
            (
                "plugins:\n  - name: a\n    endpoint: http://10.0.0.1:80\n".into(),
                "plugins[0].endpoint",
            ),
            (
                "plugins:\n  - name: a\n    endpoint: x:1\n    caCertificate:\n      caBundle: '%%'\n".into(),
                "plugins[0].caCertificate.caBundle",
            ),
            ("plugins:\n  - name: a\n    endpont: x:1\n".into(), "(file)"),
            (
                "plugins:\n  - name: a\n    endpoint: http://127.0.0.1:1\n    failurePolicy:\n      policy: Retry\n".into(),
                "plugins[0].failurePolicy.policy",
            ),
            (
                "plugins:\n  - name: a\n    endpoint: http://127.0.0.1:1\n    failurePolicy:\n      consecutiveErrors: 0\n".into(),
                "plugins[0].failurePolicy.consecutiveErrors",
            ),
            (
                "plugins:\n  - name: a\n    endpoint: http://127.0.0.1:1\n    failurePolicy:\n      unavailableFor: 5 minutes\n".into(),
                "plugins[0].failurePolicy.unavailableFor",
            ),
        ];
        for (yaml, field) in cases {
            let e = WorkConfig::parse(&yaml).unwrap_err();
            assert_eq!(e.field, field, "{yaml}: {e}");
        }
    }

    #[test]
    fn a_client_certificate_and_namespaces_parse() {
        let yaml = format!(
            "plugins:\n  - name: a\n    endpoint: a.svc:1\n    caCertificate:\n      caBundle: {}\n    clientCertificate:\n      certFile: /c.crt\n      keyFile: /c.key\n    namespaces: [team-a]\n",
            bundle()
        );
        let c = WorkConfig::parse(&yaml).unwrap();
        let p = &c.plugins[0];
        assert_eq!(
            p.client_certificate,
            Some(ClientCertificate {
                cert_file: "/c.crt".into(),
                key_file: "/c.key".into(),
            })
        );
        assert!(p.serves("team-a") && !p.serves("team-b"));
        let plain = "plugins:\n  - name: a\n    endpoint: http://127.0.0.1:1\n    clientCertificate:\n      certFile: /c.crt\n      keyFile: /c.key\n";
        let e = WorkConfig::parse(plain).unwrap_err();
        assert_eq!(e.field, "plugins[0].clientCertificate");
        let bad =
            "plugins:\n  - name: a\n    endpoint: http://127.0.0.1:1\n    namespaces: [Team_A]\n";
        assert_eq!(
            WorkConfig::parse(bad).unwrap_err().field,
            "plugins[0].namespaces"
        );
        let every = "plugins:\n  - name: a\n    endpoint: http://127.0.0.1:1\n";
        assert!(WorkConfig::parse(every).unwrap().plugins[0].serves("anyone"));
    }

    #[test]
    fn a_failure_policy_and_removal_parse() {
        let yaml = "plugins:\n  - name: a\n    endpoint: http://127.0.0.1:1\n    allowManifestRemoval: true\n    failurePolicy:\n      policy: Hold\n      consecutiveErrors: 2\n      unavailableFor: 1m30s\n";
        let c = WorkConfig::parse(yaml).unwrap();
        let p = &c.plugins[0];
        assert!(p.allow_manifest_removal);
        assert_eq!(
            p.failure_policy,
            FailurePolicyConfig {
                hold: true,
                consecutive_errors: 2,
                unavailable_for: Duration::from_secs(90),
            }
        );
        for (text, want) in [
            ("5m", Some(300)),
            ("1h", Some(3600)),
            ("", None),
            ("5", None),
            ("m", None),
            ("1.5m", Some(90)),
            ("-5m", None),
        ] {
            assert_eq!(parse_duration(text).map(|d| d.as_secs()), want, "{text:?}");
        }
    }
}

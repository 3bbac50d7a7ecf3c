//! Strict parsers for the scalar values of a rollout strategy: Go durations
//! (`minSuccessTime`, [`mwrs_duration`]), progress deadlines (`progressDeadline`, with
//! upstream's regex quirk) and int-or-percent sizes (`maxConcurrency`, `maxFailures`),
//! plus the arithmetic on them the engine needs (size resolution, deadline and soak
//! instants).
//!
//! Nothing here panics on any input: strings are scanned as bytes and every addition to
//! a timestamp saturates.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use mwrs_duration::GO_MAX_DURATION;
pub use mwrs_duration::parse_go_duration;

/// A parsed `maxConcurrency` / `maxFailures`: an absolute count or a percentage of the
/// clusters it applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Count(i32),
    Percent(u32),
}

impl Default for Size {
    /// Upstream's zero `IntOrString` (an absent field) is the integer 0.
    fn default() -> Self {
        Size::Count(0)
    }
}

impl Size {
    /// The size for `total` clusters, as upstream's `calculateRolloutSize`: a percentage
    /// rounds up (computed in `f64` exactly as Go does, so rounding matches to the last
    /// bit), and a result `<= 0` or `> total` falls back to `default`.
    pub fn resolve(&self, total: usize, default: usize) -> usize {
        let length: f64 = match *self {
            Size::Count(n) => f64::from(n),
            Size::Percent(p) => (f64::from(p) / 100.0 * total as f64).ceil(),
        };
        if length <= 0.0 || length > total as f64 {
            return default;
        }
        // In range (0, total], so the conversion is exact.
        length as usize
    }
}

/// A parsed `progressDeadline`: how long a cluster may stay Progressing or Failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Deadline {
    /// `None`, empty or absent: never times out.
    #[default]
    None,
    After(SignedDuration),
}

impl Deadline {
    /// The instant a cluster in its current state since `since` times out. Like
    /// upstream, an unknown `since` counts from `now` (so only a zero deadline fires).
    pub fn at(&self, since: Option<Timestamp>, now: Timestamp) -> Option<Timestamp> {
        match *self {
            Deadline::None => None,
            Deadline::After(d) => Some(saturating_add(since.unwrap_or(now), d)),
        }
    }

    /// Whether that instant is reached: `now` at or past it (rules §10.2).
    pub fn passed(&self, since: Option<Timestamp>, now: Timestamp) -> bool {
        self.at(since, now).is_some_and(|t| now >= t)
    }
}

/// When a cluster that succeeded at `since` ends its soak (`minSuccessTime`); `None`
/// for upstream's "infinite" sentinel, which upstream treats as no soak at all.
pub fn soak_end(
    min_success_time: SignedDuration,
    since: Option<Timestamp>,
    now: Timestamp,
) -> Option<Timestamp> {
    if min_success_time == GO_MAX_DURATION {
        return None;
    }
    Some(saturating_add(since.unwrap_or(now), min_success_time))
}

/// `t + d`, clamped to jiff's range: a deadline beyond year 9999 is as good as never,
/// and must not panic on a hostile condition timestamp.
pub fn saturating_add(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(if d.is_negative() {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// Parses an int-or-percent size. Integers are taken as they are (out-of-range values
/// resolve to the default later, as upstream); strings must be digits followed by `%`.
/// Upstream accepts any `ParseFloat`-able percentage; the CRD's pattern only lets
/// whole numbers through, so fractions are refused here. Percentages above 100 are
/// accepted (upstream's own test resolves "200%" to the default).
pub fn parse_size(v: &IntOrString) -> Result<Size, String> {
    match v {
        IntOrString::Int(n) => Ok(Size::Count(*n)),
        IntOrString::String(s) => {
            let Some(digits) = s.strip_suffix('%') else {
                return Err(format!(
                    "'{s}' is an invalid maximum threshold value: string is not a percentage"
                ));
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "'{s}' is an invalid maximum threshold value: expected a whole percentage like \"25%\""
                ));
            }
            digits
                .parse::<u32>()
                .map(Size::Percent)
                .map_err(|_| format!("'{s}' is an invalid maximum threshold value: too large"))
        }
    }
}

/// Parses a `progressDeadline`. Upstream first checks the regex
/// `^(([0-9])+[h|m|s])|None$`, whose alternation binds loosely: a value passes when it
/// *starts* with digits and one of `h`, `m`, `s`, `|` — or *ends* with `None`. Only then
/// is it parsed as a Go duration. So "1h30m" and "0s" are valid, "1.5h", "2d", "0" and
/// "10g" are not.
pub fn parse_deadline(s: &str) -> Result<Deadline, String> {
    if s.is_empty() || s == "None" {
        return Ok(Deadline::None);
    }
    if !deadline_pattern_matches(s) {
        return Err(format!(
            "invalid timeout format {s:?}: expected a duration such as \"90s\", \"5m\" or \"1h30m\", or \"None\""
        ));
    }
    let d = parse_go_duration(s)?;
    if d == GO_MAX_DURATION {
        return Ok(Deadline::None);
    }
    Ok(Deadline::After(d))
}

fn deadline_pattern_matches(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    let prefix_ok = digits > 0 && matches!(b.get(digits), Some(b'h' | b'm' | b's' | b'|'));
    prefix_ok || s.ends_with("None")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: i64) -> SignedDuration {
        SignedDuration::from_secs(s)
    }

    #[test]
    fn deadline_regex_quirk() {
        assert_eq!(parse_deadline("1h30m"), Ok(Deadline::After(secs(5400))));
        assert_eq!(
            parse_deadline("0s"),
            Ok(Deadline::After(SignedDuration::ZERO))
        );
        assert_eq!(
            parse_deadline("5ms"),
            Ok(Deadline::After(SignedDuration::from_millis(5)))
        );
        assert_eq!(parse_deadline("None"), Ok(Deadline::None));
        assert_eq!(parse_deadline(""), Ok(Deadline::None));
        for s in [
            "1.5h", "2d", "0", "10g", "+5s", "10us", "s", "none", "5|", "xNone", "5s-3s",
        ] {
            assert!(parse_deadline(s).is_err(), "{s} should be refused");
        }
        // Upstream's "infinite" sentinel written out by hand still means no deadline.
        assert_eq!(
            parse_deadline("2562047h47m16.854775807s"),
            Ok(Deadline::None)
        );
    }

    #[test]
    fn deadline_boundary_is_inclusive() {
        let t0: Timestamp = "2022-01-01T00:00:00Z".parse().unwrap();
        let d = Deadline::After(secs(60));
        assert!(!d.passed(Some(t0), saturating_add(t0, secs(59))));
        assert!(d.passed(Some(t0), saturating_add(t0, secs(60))));
        assert!(!d.passed(None, t0));
        assert!(Deadline::After(SignedDuration::ZERO).passed(None, t0));
        assert!(!Deadline::None.passed(Some(Timestamp::MIN), t0));
        assert_eq!(d.at(Some(Timestamp::MAX), t0), Some(Timestamp::MAX));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size(&IntOrString::Int(-3)), Ok(Size::Count(-3)));
        assert_eq!(
            parse_size(&IntOrString::String("25%".into())),
            Ok(Size::Percent(25))
        );
        assert_eq!(
            parse_size(&IntOrString::String("200%".into())),
            Ok(Size::Percent(200))
        );
        for s in [
            "5",
            "",
            "%",
            "5.5%",
            "-5%",
            " 5%",
            "5 %",
            "99999999999%",
            "1e2%",
        ] {
            assert!(parse_size(&IntOrString::String(s.into())).is_err(), "{s:?}");
        }
        assert_eq!(Size::Percent(50).resolve(5, 9), 3);
        assert_eq!(Size::Percent(0).resolve(5, 9), 9);
        assert_eq!(Size::Count(5).resolve(3, 0), 0);
        assert_eq!(Size::Count(-1).resolve(3, 7), 7);
        assert_eq!(Size::Percent(30).resolve(3, 0), 1);
        assert_eq!(Size::Percent(100).resolve(0, 0), 0);
    }
}

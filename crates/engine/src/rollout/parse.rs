//! Strict parsers for the scalar values of a rollout strategy: Go durations
//! (`minSuccessTime`), progress deadlines (`progressDeadline`, with upstream's regex
//! quirk) and int-or-percent sizes (`maxConcurrency`, `maxFailures`), plus the arithmetic
//! on them the engine needs (size resolution, deadline and soak instants).
//!
//! Nothing here panics on any input: strings are scanned as bytes and every addition to
//! a timestamp saturates.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Go's `math.MaxInt64` nanoseconds. Upstream uses this exact duration as its "no
/// deadline / no soak" sentinel, so a user-written duration equal to it behaves as none.
const GO_MAX_DURATION: SignedDuration = SignedDuration::new(9_223_372_036, 854_775_807);

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

    /// Whether that instant is reached: `now` at or past it (SPEC §10.2).
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

const NANOS: u64 = 1;
const UNITS: [(&[u8], u64); 8] = [
    (b"ns", NANOS),
    (b"us", 1_000),
    ("\u{00b5}s".as_bytes(), 1_000), // micro sign
    ("\u{03bc}s".as_bytes(), 1_000), // Greek small letter mu
    (b"ms", 1_000_000),
    (b"s", 1_000_000_000),
    (b"m", 60_000_000_000),
    (b"h", 3_600_000_000_000),
];

const LIMIT: u64 = 1 << 63;

/// Go's `time.ParseDuration`, to the same acceptance and overflow rules: an optional
/// sign, then one or more `<number><unit>` with decimal fractions allowed; "0" alone
/// needs no unit. Used for `minSuccessTime` (a `metav1.Duration`).
pub fn parse_go_duration(s: &str) -> Result<SignedDuration, String> {
    let invalid = || format!("invalid duration {s:?}");
    let mut rest = s.as_bytes();
    let mut neg = false;
    if let Some((&c, tail)) = rest.split_first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        rest = tail;
    }
    if rest == b"0" {
        return Ok(SignedDuration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let (value, tail) = duration_term(rest).ok_or_else(invalid)?;
        rest = tail;
        total = total
            .checked_add(value)
            .filter(|t| *t <= LIMIT)
            .ok_or_else(invalid)?;
    }
    to_signed(total, neg).ok_or_else(invalid)
}

fn to_signed(total: u64, neg: bool) -> Option<SignedDuration> {
    let nanos: i64 = if neg {
        // 1<<63 negated is exactly i64::MIN.
        0i64.checked_sub_unsigned(total)?
    } else {
        i64::try_from(total).ok()?
    };
    Some(SignedDuration::from_nanos(nanos))
}

/// One `<number><unit>` term: its value in nanoseconds and the unparsed rest.
fn duration_term(s: &[u8]) -> Option<(u64, &[u8])> {
    if !matches!(s.first(), Some(c) if *c == b'.' || c.is_ascii_digit()) {
        return None;
    }
    let (int, after_int, had_int) = leading_int(s)?;
    let (frac, scale, rest, had_frac) = match after_int.split_first() {
        Some((b'.', tail)) => {
            let (f, scale, rest) = leading_fraction(tail);
            (f, scale, rest, rest.len() != tail.len())
        }
        _ => (0, 1.0, after_int, false),
    };
    if !had_int && !had_frac {
        return None;
    }
    let unit_len = rest
        .iter()
        .take_while(|c| **c != b'.' && !c.is_ascii_digit())
        .count();
    if unit_len == 0 {
        return None;
    }
    let (unit, rest) = rest.split_at(unit_len);
    let unit = UNITS.iter().find(|(name, _)| *name == unit)?.1;
    if int > LIMIT / unit {
        return None;
    }
    let mut value = int * unit;
    if frac > 0 {
        // Go converts the fraction through float64 in exactly this order.
        value += (frac as f64 * (unit as f64 / scale)) as u64;
        if value > LIMIT {
            return None;
        }
    }
    Some((value, rest))
}

/// Leading decimal digits as an integer; `None` on overflow past 1<<63.
fn leading_int(s: &[u8]) -> Option<(u64, &[u8], bool)> {
    let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut x: u64 = 0;
    for &c in &s[..n] {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(c - b'0');
        if x > LIMIT {
            return None;
        }
    }
    Some((x, &s[n..], n > 0))
}

/// Leading fraction digits; digits beyond what fits are consumed but ignored, as Go does.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let (mut x, mut scale, mut overflow) = (0u64, 1.0f64, false);
    for &c in &s[..n] {
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(c - b'0');
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[n..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: i64) -> SignedDuration {
        SignedDuration::from_secs(s)
    }

    #[test]
    fn go_durations() {
        let ok = [
            ("0", SignedDuration::ZERO),
            ("+0", SignedDuration::ZERO),
            ("-0", SignedDuration::ZERO),
            ("90s", secs(90)),
            ("2m", secs(120)),
            ("1h30m", secs(5400)),
            ("1.5h", secs(5400)),
            ("300ms", SignedDuration::from_millis(300)),
            ("1us", SignedDuration::from_micros(1)),
            ("1\u{00b5}s", SignedDuration::from_micros(1)),
            ("1\u{03bc}s", SignedDuration::from_micros(1)),
            ("7ns", SignedDuration::from_nanos(7)),
            (".5s", SignedDuration::from_millis(500)),
            ("5.s", secs(5)),
            ("-1m", secs(-60)),
            ("0s", SignedDuration::ZERO),
            ("1h1h", secs(7200)),
            ("9223372036854775807ns", GO_MAX_DURATION),
            (
                "-9223372036854775808ns",
                SignedDuration::from_nanos(i64::MIN),
            ),
            ("2562047h47m16.854775807s", GO_MAX_DURATION),
        ];
        for (s, want) in ok {
            assert_eq!(parse_go_duration(s), Ok(want), "{s}");
        }
        let bad = [
            "",
            "-",
            "+",
            "s",
            ".",
            ".s",
            "1",
            "10",
            "1d",
            "1.5",
            "1h30",
            "1 h",
            " 1h",
            "1h ",
            "9223372036854775808ns",
            "2562048h",
            "1e3s",
            "0x10s",
            "1__s",
            "--1s",
            "µs",
        ];
        for s in bad {
            assert!(parse_go_duration(s).is_err(), "{s} should be refused");
        }
    }

    /// Produced by Go 1.x `time.ParseDuration` (fractions go through float64 there).
    #[test]
    fn go_duration_golden_vectors() {
        let golden = [
            ("969105h3111.1695576578659365ms", 3_488_778_003_111_169_557),
            ("83158.498064842168\u{00b5}s", 83_158_498),
            ("-0ns56.544341ms11139.54596917us", -67_683_886),
            ("4735.124431261760188784us68ns", 4_735_192),
            (
                "17166.434292094911\u{03bc}s842438.00m1us",
                50_546_280_017_167_434,
            ),
            ("48.0008\u{03bc}s263.5412926798263624907\u{00b5}s", 311_541),
            ("+0s62033m.16361990619944m", 3_721_989_817_194_371),
            (
                "-0.000263s90984.11792009886447ns1.000000000509h",
                -3_600_000_355_816,
            ),
            (
                "-.5485488ms823\u{03bc}s224.901481624h",
                -809_645_335_217_948,
            ),
            ("+21.935504926079137m", 1_316_130_295_564),
        ];
        for (s, nanos) in golden {
            assert_eq!(
                parse_go_duration(s),
                Ok(SignedDuration::from_nanos(nanos)),
                "{s}"
            );
        }
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

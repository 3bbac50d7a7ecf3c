//! Go's `time.ParseDuration` ([`parse_go_duration`]), to the same acceptance and overflow
//! rules, for every duration this project reads as Kubernetes writes it: a strategy's
//! `minSuccessTime` and `progressDeadline` (the engine), a rollout plugin's timings (the
//! reference plugin), the CLI's flags. Its own crate so that a reader of durations need not
//! depend on the whole engine.

use jiff::SignedDuration;

/// The largest Go duration (`1<<63 - 1` ns), which upstream also uses as "for ever".
pub const GO_MAX_DURATION: SignedDuration = SignedDuration::new(9_223_372_036, 854_775_807);

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
}

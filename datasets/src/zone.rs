//! The time zone of a trace's zone-less local timestamps ([`TraceZone`]): UTC, a fixed offset
//! or an IANA zone, and the conversion of a local time to Unix seconds in it.

use std::fmt;
use std::str::FromStr;

use chrono::{FixedOffset, LocalResult, NaiveDateTime, TimeZone};

/// Where a trace's local times (`2026-11-23T07:01:02`, no zone) were written.
///
/// A local time that falls twice (the hour a zone turns its clocks back) is read as the
/// earlier of the two; one that never happens (the hour skipped when clocks go forward) has no
/// Unix time ([`TraceZone::to_unix`] returns `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceZone {
    /// Coordinated Universal Time (the default).
    #[default]
    Utc,
    /// A fixed offset from UTC (`+02:00`, `-05:00`).
    Fixed(FixedOffset),
    /// An IANA time-zone database zone (`Europe/Berlin`), with its daylight-saving rules.
    Named(chrono_tz::Tz),
}

/// A time-zone name that is neither `UTC`, a fixed offset nor an IANA zone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone `{0}`: give an IANA name (`Europe/Berlin`), `UTC` or a fixed offset (`+02:00`)")]
pub struct UnknownZone(pub String);

impl TraceZone {
    /// Unix seconds of a local time in this zone; `None` for a time the zone skips.
    pub fn to_unix(&self, local: &NaiveDateTime) -> Option<f64> {
        let millis = match self {
            TraceZone::Utc => Some(local.and_utc().timestamp_millis()),
            TraceZone::Fixed(off) => earliest(off.from_local_datetime(local)),
            TraceZone::Named(tz) => earliest(tz.from_local_datetime(local)),
        }?;
        Some(millis as f64 / 1000.0)
    }
}

fn earliest<T: TimeZone>(r: LocalResult<chrono::DateTime<T>>) -> Option<i64> {
    r.earliest().map(|t| t.timestamp_millis())
}

/// Parses `+HH:MM`, `-HH:MM`, `+HHMM` or `+HH` (at most 23:59 either way).
fn parse_offset(s: &str) -> Option<FixedOffset> {
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|&c| c != ':').collect();
    let colon_ok = match rest.find(':') {
        None => true,
        Some(i) => i == 2 && rest.len() == 5,
    };
    if !colon_ok || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m) = match digits.len() {
        2 => (digits.parse::<i32>().ok()?, 0),
        4 => (
            digits[..2].parse::<i32>().ok()?,
            digits[2..].parse::<i32>().ok()?,
        ),
        _ => return None,
    };
    if h > 23 || m > 59 {
        return None;
    }
    FixedOffset::east_opt(sign * (h * 3600 + m * 60))
}

impl FromStr for TraceZone {
    type Err = UnknownZone;

    /// `UTC`/`Z` (any case), a fixed offset (`+02:00`) or an IANA name (`America/New_York`).
    fn from_str(s: &str) -> Result<TraceZone, UnknownZone> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("utc") || s.eq_ignore_ascii_case("z") {
            return Ok(TraceZone::Utc);
        }
        if let Some(off) = parse_offset(s) {
            return Ok(TraceZone::Fixed(off));
        }
        s.parse::<chrono_tz::Tz>()
            .map(TraceZone::Named)
            .map_err(|_| UnknownZone(s.to_string()))
    }
}

impl fmt::Display for TraceZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceZone::Utc => f.write_str("UTC"),
            TraceZone::Fixed(off) => write!(f, "{off}"),
            TraceZone::Named(tz) => f.write_str(tz.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").unwrap()
    }

    #[test]
    fn names_offsets_and_utc_parse() {
        assert_eq!("UTC".parse::<TraceZone>(), Ok(TraceZone::Utc));
        assert_eq!("z".parse::<TraceZone>(), Ok(TraceZone::Utc));
        let plus2 = FixedOffset::east_opt(7200).unwrap();
        assert_eq!("+02:00".parse::<TraceZone>(), Ok(TraceZone::Fixed(plus2)));
        assert_eq!("+0200".parse::<TraceZone>(), Ok(TraceZone::Fixed(plus2)));
        assert_eq!("+02".parse::<TraceZone>(), Ok(TraceZone::Fixed(plus2)));
        let minus530 = FixedOffset::east_opt(-(5 * 3600 + 30 * 60)).unwrap();
        assert_eq!(
            "-05:30".parse::<TraceZone>(),
            Ok(TraceZone::Fixed(minus530))
        );
        assert_eq!(
            "Europe/Berlin".parse::<TraceZone>(),
            Ok(TraceZone::Named(chrono_tz::Tz::Europe__Berlin))
        );
        for bad in ["Mars/Olympus", "+24:00", "+2:00", "02:00", "+02:0", "", "+"] {
            assert!(bad.parse::<TraceZone>().is_err(), "{bad:?}");
        }
        assert_eq!(TraceZone::Fixed(plus2).to_string(), "+02:00");
        assert_eq!(
            "America/New_York".parse::<TraceZone>().unwrap().to_string(),
            "America/New_York"
        );
    }

    #[test]
    fn local_times_become_unix_seconds() {
        let t = local("2026-11-23T07:01:02");
        let utc = TraceZone::Utc.to_unix(&t).unwrap();
        assert_eq!(utc, 1_795_417_262.0);
        let plus2: TraceZone = "+02:00".parse().unwrap();
        assert_eq!(plus2.to_unix(&t), Some(utc - 7200.0));
        // New York is UTC-5 in November and UTC-4 in July.
        let ny: TraceZone = "America/New_York".parse().unwrap();
        assert_eq!(ny.to_unix(&t), Some(utc + 5.0 * 3600.0));
        let july = local("2026-07-01T12:00:00");
        assert_eq!(
            ny.to_unix(&july),
            Some(TraceZone::Utc.to_unix(&july).unwrap() + 4.0 * 3600.0)
        );
    }

    #[test]
    fn clock_changes_skip_and_repeat_local_times() {
        let berlin: TraceZone = "Europe/Berlin".parse().unwrap();
        // 2026-03-29 02:30 does not exist in Berlin (clocks go 02:00 → 03:00).
        assert_eq!(berlin.to_unix(&local("2026-03-29T02:30:00")), None);
        // 2026-10-25 02:30 happens twice; the earlier one is UTC+2.
        let t = local("2026-10-25T02:30:00");
        assert_eq!(
            berlin.to_unix(&t),
            Some(TraceZone::Utc.to_unix(&t).unwrap() - 7200.0)
        );
    }
}

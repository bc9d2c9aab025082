//! Times of ingested events: read as epoch seconds (a number) or an RFC 3339 string (stored
//! as epoch seconds either way), and the [`TimeWindow`] they must fall in: on the live
//! backends from 2000-01-01 to the wall clock plus `max_future_skew_seconds`; on the
//! simulator from its trace's start to its own clock plus the same skew in simulated seconds.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};

/// The times an ingested event may carry, each bound with why it is there.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeWindow {
    pub earliest: f64,
    pub earliest_why: String,
    pub latest: f64,
    pub latest_why: String,
}

/// Seconds since the Unix epoch, now.
pub fn wall_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A string that is not an RFC 3339 time.
#[derive(Debug, thiserror::Error)]
#[error("`{text}` is not a time: give epoch seconds or an RFC 3339 string such as 2024-05-01T12:00:00Z ({source})")]
pub struct NotATime {
    text: String,
    #[source]
    source: chrono::ParseError,
}

/// Reads an RFC 3339 time (`2024-05-01T12:00:00Z`) as epoch seconds.
pub fn parse_rfc3339(s: &str) -> Result<f64, NotATime> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp() as f64 + f64::from(t.timestamp_subsec_nanos()) * 1e-9)
        .map_err(|source| NotATime {
            text: s.to_string(),
            source,
        })
}

struct TimeVisitor;

impl Visitor<'_> for TimeVisitor {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("epoch seconds or an RFC 3339 string")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        parse_rfc3339(v).map_err(E::custom)
    }
}

/// Serde reader of a time field (see the module doc).
pub fn time<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    d.deserialize_any(TimeVisitor)
}

/// Serde reader of an optional time field.
pub fn optional_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    struct OptVisitor;
    impl<'de> Visitor<'de> for OptVisitor {
        type Value = Option<f64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("null, epoch seconds or an RFC 3339 string")
        }
        fn visit_none<E: de::Error>(self) -> Result<Option<f64>, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<f64>, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<f64>, D::Error> {
            time(d).map(Some)
        }
    }
    d.deserialize_option(OptVisitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct T {
        #[serde(deserialize_with = "time")]
        at: f64,
        #[serde(default, deserialize_with = "optional_time")]
        maybe: Option<f64>,
    }

    #[test]
    fn times_read_as_numbers_or_rfc3339() {
        let t: T = serde_json::from_str(r#"{"at": 1714564800}"#).unwrap();
        assert_eq!((t.at, t.maybe), (1_714_564_800.0, None));
        let t: T = serde_json::from_str(
            r#"{"at": "2024-05-01T12:00:00Z", "maybe": "2024-05-01T14:00:00.5+02:00"}"#,
        )
        .unwrap();
        assert_eq!(t.at, 1_714_564_800.0);
        assert_eq!(t.maybe, Some(1_714_564_800.5));
        let e = serde_json::from_str::<T>(r#"{"at": "yesterday"}"#).unwrap_err();
        assert!(e.to_string().contains("RFC 3339"), "{e}");
        let t: T = serde_json::from_str(r#"{"at": 1.5, "maybe": null}"#).unwrap();
        assert_eq!((t.at, t.maybe), (1.5, None));
    }
}

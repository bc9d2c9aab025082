//! What the fake records of each request ([`Request`]) and the faults tests inject
//! ([`Fault`]).

use std::time::Duration;

use serde_json::Value;

/// A request as the server saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: Option<String>,
    pub body: Option<Value>,
}

/// A fault answered instead of the real response to matching requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub method: &'static str,
    /// Matches when the path ends with this.
    pub path_suffix: String,
    /// Error status to answer (`None`: answer normally after the delay).
    pub status: Option<u16>,
    /// Wait this long first.
    pub delay: Duration,
    /// `Retry-After` seconds in the error's details.
    pub retry_after_s: u32,
    /// Requests it still applies to.
    pub times: u32,
    /// Matches only requests whose query contains this.
    pub query_contains: String,
}

impl Fault {
    pub fn status(method: &'static str, path_suffix: &str, status: u16, times: u32) -> Fault {
        Fault {
            method,
            path_suffix: path_suffix.into(),
            status: Some(status),
            delay: Duration::ZERO,
            retry_after_s: 0,
            times,
            query_contains: String::new(),
        }
    }
    /// The next `times` watches of the collection at `path` end at once with a `410 Expired`
    /// ERROR event (their resourceVersion was compacted away).
    pub fn expire_watch(path: &str, times: u32) -> Fault {
        Fault {
            query_contains: "watch=true".into(),
            ..Fault::status("GET", path, 410, times)
        }
    }
    pub fn slow(method: &'static str, path_suffix: &str, delay: Duration, times: u32) -> Fault {
        Fault {
            method,
            path_suffix: path_suffix.into(),
            status: None,
            delay,
            retry_after_s: 0,
            times,
            query_contains: String::new(),
        }
    }
}

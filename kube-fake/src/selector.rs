//! Label selectors of list and watch requests (`labelSelector`): the equality (`k=v`, `k==v`),
//! inequality (`k!=v`), existence (`k`) and non-existence (`!k`) requirements, comma-separated.

use serde_json::Value;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Exists(String),
    Absent(String),
    Equals(String, String),
    NotEquals(String, String),
}

/// A parsed `labelSelector` (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Selector(Vec<Requirement>);

/// Decodes `%XX` escapes and `+` of a query value.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' if i + 2 < b.len() => {
                if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Selector {
    /// The selector of a raw (URL-encoded) `labelSelector` value.
    pub(crate) fn parse(raw: &str) -> Selector {
        let s = decode(raw);
        let reqs = s
            .split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| {
                if let Some((k, v)) = r.split_once("!=") {
                    Requirement::NotEquals(k.trim().into(), v.trim().into())
                } else if let Some((k, v)) = r.split_once("==").or_else(|| r.split_once('=')) {
                    Requirement::Equals(k.trim().into(), v.trim().into())
                } else if let Some(k) = r.strip_prefix('!') {
                    Requirement::Absent(k.trim().into())
                } else {
                    Requirement::Exists(r.into())
                }
            })
            .collect();
        Selector(reqs)
    }

    /// True when the object's labels satisfy every requirement.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let label = |k: &str| obj.pointer("/metadata/labels").and_then(|l| l.get(k));
        self.0.iter().all(|r| match r {
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::Absent(k) => label(k).is_none(),
            Requirement::Equals(k, v) => label(k).and_then(Value::as_str) == Some(v),
            Requirement::NotEquals(k, v) => label(k).and_then(Value::as_str) != Some(v),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_match_labels() {
        let o = json!({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-a", "x": "1"}}});
        assert!(Selector::parse("kueue.x-k8s.io%2Fqueue-name").matches(&o));
        assert!(Selector::parse("kueue.x-k8s.io/queue-name=team-a,x").matches(&o));
        assert!(!Selector::parse("kueue.x-k8s.io%2Fqueue-name%3Dteam-b").matches(&o));
        assert!(Selector::parse("x!=2,!y").matches(&o));
        assert!(!Selector::parse("y").matches(&json!({"metadata": {}})));
        assert!(Selector::parse("").matches(&json!({})));
    }
}

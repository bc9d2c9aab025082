//! The commands' HTTP client of a running service (`augur eta`, `augur advise`): one plain
//! HTTP/1.1 request over TCP per call (the service serves plain HTTP; put a TLS proxy in
//! front of it on a shared network and run the commands where the service listens).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, Context};

/// `method url+path` with an optional JSON `body` and bearer `token`: the status and the
/// body of the answer.
pub fn request(
    url: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    let Some(rest) = url.strip_prefix("http://") else {
        bail!("--url `{url}`: give the service's http:// address (e.g. http://127.0.0.1:8080)");
    };
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains('/') {
        bail!("--url `{url}`: give the service's address without a path");
    }
    let with_port = if host
        .rsplit(':')
        .next()
        .is_some_and(|p| p.parse::<u16>().is_ok())
    {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .with_context(|| format!("--url `{url}`: cannot resolve {with_port}"))?
        .next()
        .with_context(|| format!("--url `{url}`: {with_port} has no address"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).with_context(|| {
            format!("cannot reach the service at {url} (is `augur serve` running?)")
        })?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let content = body.map_or(String::new(), |b| {
        format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        )
    });
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n{auth}{content}Connection: close\r\n\r\n{}",
        body.unwrap_or("")
    )?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .with_context(|| format!("reading the answer of {url}{path}"))?;
    parse_response(&raw).with_context(|| format!("the answer of {url}{path}"))
}

/// Status and body of an HTTP/1.1 response (identity or chunked body).
fn parse_response(raw: &[u8]) -> anyhow::Result<(u16, String)> {
    let text = String::from_utf8_lossy(raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("no HTTP header");
    };
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .context("no HTTP status line")?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if !chunked {
        return Ok((status, body.to_string()));
    }
    let mut out = String::new();
    let mut rest = body;
    loop {
        let (size, after) = rest.split_once("\r\n").context("a truncated chunk")?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .context("a bad chunk size")?;
        if size == 0 {
            return Ok((status, out));
        }
        let chunk = after.get(..size).context("a truncated chunk")?;
        out.push_str(chunk);
        rest = after.get(size + 2..).unwrap_or("");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_read() {
        let (s, b) = parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((s, b.as_str()), (200, "{}"));
        let raw = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let (s, b) = parse_response(raw).unwrap();
        assert_eq!((s, b.as_str()), (404, "abcde"));
        assert!(parse_response(b"garbage").is_err());
    }
}

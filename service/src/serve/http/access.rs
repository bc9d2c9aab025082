//! Which routes need the bearer token: the mutating ones (marked in the route table,
//! [`super::routes`]) and, when `auth_reads` is on, the reads that name users and jobs
//! ([`SENSITIVE_READS`]). The router applies it and the OpenAPI document
//! ([`super::openapi`]) states it; both read it here.

/// Reads that expose users and job names: they need the token too when `auth_reads` is on.
pub const SENSITIVE_READS: &[&str] = &[
    "/v1/events",
    "/v1/jobs/{id}",
    "/v1/predictions/recent",
    "/v1/eta",
    "/v1/autoscaler/decisions",
];

/// Whether the route `method path` needs the token: always when it is `mutating`, and under
/// `auth_reads` when it is a sensitive read.
pub fn needs_token(method: &str, path: &str, mutating: bool, auth_reads: bool) -> bool {
    mutating || (auth_reads && method == "GET" && SENSITIVE_READS.contains(&path))
}

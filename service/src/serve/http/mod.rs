//! The service's HTTP face: the route table and the OpenAPI document built from it,
//! the handlers, authentication, the one error type, the accept loop, the front
//! answered while the service starts, the status page and `/metrics`.

pub mod access;
pub mod api;
pub mod auth;
pub mod error;
pub mod listen;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod starting;
pub mod status;

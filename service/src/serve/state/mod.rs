//! What the service knows: the event types and their checks, the durable event
//! store, the ingest pipeline that applies stored events to the served kinds, the
//! online state, its snapshots, the data folder's identity, and the reading of why a queued
//! job waits.

pub mod bounds;
pub mod event_time;
pub mod events;
pub mod identity;
pub mod ingest;
pub mod online;
pub mod profile;
pub mod snapshot;
pub mod store;
pub mod why;

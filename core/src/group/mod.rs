//! Consumer groups (Kafka's classic protocol), as sans-I/O state machines.
//!
//! * [`protocol`]: requests, responses, typed errors; group -> `__consumer_offsets` partition.
//! * [`records`]: key/value encodings of group metadata and committed offsets, read back
//!   latest-per-key.
//! * [`assignor`]: range, round-robin and cooperative-sticky assignors (pure functions).
//! * [`coordinator`]: `GroupCoordinator`, the groups of one `__consumer_offsets` partition,
//!   hosted by the broker leading that partition.
//! * [`host`]: `GroupCoordinators`, the per-broker set of hosted coordinators (broker seam).
//! * [`consumer`]: `GroupConsumer`, the client side.
//!
//! See `docs/groups.md` for the protocol, fencing and persistence format.

pub mod assignor;
mod check;
pub mod coordinator;
pub mod host;
pub(crate) mod owned;
pub mod protocol;
pub mod records;
pub mod state;

pub use assignor::*;
pub use check::{GroupCheckError, GroupCheckpoint};
pub use coordinator::*;
pub use host::GroupCoordinators;
pub use protocol::*;

#[cfg(test)]
mod tests;

//! Transactions and exactly-once (KIP-98, KIP-447, KIP-890), as sans-I/O state machines.
//!
//! * [`bugs`]: the zoo's switches for each protection (all off by default).
//! * [`protocol`]: requests, responses, typed errors, markers; transactional id ->
//!   `__transaction_state` partition.
//! * [`state`]: one transactional id's metadata and its legal transitions.
//! * [`records`]: its encoding in `__transaction_state`.
//! * [`coordinator`]: the coordinator of one `__transaction_state` partition.
//! * [`host`]: the set of coordinators a broker hosts.
//!
//! See `docs/transactions.md` for the protocol, its states and its guarantees.

pub mod bugs;
pub mod coordinator;
pub mod host;
pub mod protocol;
pub mod records;
pub mod state;

pub use bugs::TxnBugs;
pub use coordinator::{TxnConfig, TxnCoordinator, TxnLoadError, TxnOutput, TxnPhase};
pub use host::TxnCoordinators;
pub use state::{TxnMetadata, TxnState};

pub use protocol::*;

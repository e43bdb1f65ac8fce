//! Transactions and exactly-once (KIP-98, KIP-447, KIP-890), as sans-I/O state machines.
//!
//! * [`bugs`]: the zoo's switches for each protection (all off by default).
//! * [`protocol`]: requests, responses, typed errors, markers; transactional id ->
//!   `__transaction_state` partition.
//!
//! See `docs/transactions.md` for the protocol, its states and its guarantees.

pub mod bugs;
pub mod protocol;

pub use bugs::TxnBugs;

pub use protocol::*;

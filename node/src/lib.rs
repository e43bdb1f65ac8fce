//! # skein-node: the real runtime and the `skein` command line
//!
//! Wraps the very `skein-core` state machines the simulator judges in a runtime of sockets,
//! files and timers. Data flow: bytes arrive on a TCP connection (one tokio task per
//! connection), are decoded as [`frame::Frame`]s and handed, tagged with the sender's
//! address, to the single task that owns the node's state machine (a broker or the
//! controller behind core's node driver, `skein_core::node`, see [`runtime`]). That task
//! feeds them to `step`, calls `handle_timeout` at `poll_timeout`, and routes every output
//! message back out over the connection to the address it names. [`client`] is the other end: the producer, consumer and admin calls the
//! `skein` CLI uses. [`config`] reads and validates the TOML configuration.

pub mod broker_pool;
pub mod client;
pub mod config;
pub mod file_storage;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod group_client;
pub mod kafka;
pub mod net;
pub mod runtime;
pub mod stats;
pub mod topic_configs;
pub mod txn_client;

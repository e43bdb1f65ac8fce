//! # skein-core: the sans-I/O heart of Skein
//!
//! Every protocol of Skein lives here as a deterministic state machine: the partition log
//! (`log`), and on top of it replication, the controller, consumer groups and producer
//! idempotence. Nothing in this crate opens a socket, starts a thread, reads the wall clock
//! or draws global randomness. Data flows in one direction: a driver (the simulator in
//! `skein-sim`, or the real runtime in `skein-node`) feeds a state machine its inputs —
//! messages, the current time, storage through the small [`log::Storage`] trait — and
//! collects the effects it returns (messages to send, records to make durable, replies to
//! clients). Same inputs, same outputs, always; that is what lets one seed replay a run.
//! Drivers hold a broker or controller through `node` (the node driver: messages in from an
//! `Address`, messages out to one, time in, the next timeout out), so none of them maps
//! addresses to requesters or wraps replies itself.
//! The client side (`client`: leader cache, produce retry policy, fetch cursor, the group
//! consumer's wire translation) is sans-I/O too, so the simulator drives the same client
//! code that `skein produce` / `skein consume` run.

pub mod broker;
pub mod bugs;
mod byte_reader;
pub mod client;
pub mod controller;
pub mod fxhash;
pub mod group;
pub mod log;
pub mod message;
pub mod node;
pub mod probe;
pub mod producer;
pub mod raft;
pub mod replica;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod txn;
pub mod types;

pub use types::*;

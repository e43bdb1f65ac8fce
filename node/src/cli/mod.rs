//! Subcommands of the `skein` binary.

pub mod admin;
pub mod bench;
pub mod check;
pub mod cluster;
pub mod common;
pub mod consume;
pub mod group;
pub mod jepsen;
pub mod node;
pub mod produce;
mod produce_txn;
pub mod sim;
mod time_to_bug;
pub mod topic;

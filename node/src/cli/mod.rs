//! Subcommands of the `skein` binary.

pub mod check;
pub mod cluster;
pub mod common;
pub mod consume;
pub mod node;
pub mod produce;
pub mod sim;
pub mod topic;

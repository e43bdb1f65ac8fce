//! Subcommands of the `skein` binary.

pub mod check;
pub mod sim;

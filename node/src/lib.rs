//! # skein-node: the real runtime and the `skein` command line
//!
//! Wraps the `skein-core` state machines in a runtime of sockets, files and timers.

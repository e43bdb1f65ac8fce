//! # skein-sim: the deterministic simulator
//!
//! One seed drives a whole simulated Skein cluster: network, disks, crashes, clocks and the
//! client workload. The simulator runs the very `skein-core` state machines the node runs,
//! feeds them events in simulated time, checks invariants as it goes, records the client
//! history for `skein-jepsen`, and hashes its trace so a seed can be replayed exactly.

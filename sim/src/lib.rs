//! # skein-sim: the deterministic simulator
//!
//! One seed drives a whole simulated Skein cluster: network, disks, crashes, clocks and the
//! client workload. The simulator runs the very `skein-core` state machines the node runs,
//! feeds them events in simulated time, checks invariants as it goes, records the client
//! history for `skein-jepsen`, and hashes its trace so a seed can be replayed exactly.
//!
//! Data flow: [`config::SimConfig`] (from flags, mapped by [`cli`], or a [`scenario`]
//! file) and a seed go into the [`world`], which splits the seed into per-subsystem PRNG
//! streams ([`rng`]), draws a fault schedule ([`faults`]), and runs a discrete-event loop
//! ([`queue`]) in which every message between brokers, the controller and clients passes
//! through the network model ([`net`]), every disk access through a fault-injecting
//! in-memory disk, and every node sees time through its own clock ([`clock`]); brokers and
//! controllers are driven through core's node driver (`skein_core::node`). After each
//! event the [`invariants`] are checked against read-only views of the brokers; every
//! event is folded into the [`trace`] hash.
//! Consumer-group members ([`group_client`]) drive the real `GroupConsumer` against the
//! brokers' coordinators, and [`group_invariants`] checks ownership and committed offsets.
//! No wall clock, no threads, no hash maps: the same seed gives the same run everywhere.
//!
//! ## Floors
//!
//! Each module imports only from its own floor or lower ones, so the files read bottom-up
//! with no import circle (`client` and `group_client` once reached `config`, `scenario`,
//! `invariants` and `trace` through one another):
//! 0. Vocabulary, importing nothing from the crate: [`time`], [`rng`], [`fasthash`],
//!    [`fnv`] (the hash), [`slots`], [`topic`] (the workload's topic, process ids and
//!    values), [`modes`] (`Acks`, `CommitMode`).
//! 1. Models of the world's parts and of what a run reports: [`clock`], [`net`],
//!    [`queue`], [`faults`], [`atlas`], [`violation`] (invariant names), [`fields`] (a
//!    traced event's structure), [`report`].
//! 2. A run's description and records: [`expect`], [`config`], [`scenario`], [`history`],
//!    [`disk`], [`client_step`] (a client step's context and observations).
//! 3. Checks and tracing: [`invariants`], [`group_invariants`], [`trace`], [`viewer`].
//! 4. Clients: [`client`] (producers, consumers), [`group_client`] (group members),
//!    [`txn_client`] (transactional producers, `--workload txn`).
//! 5. The [`world`] that runs them all.
//! 6. Tools around runs: [`shrink`], [`sweep`], [`cli`], [`plots`] (a run's faults, roles
//!    and violations for its report directory).

pub mod atlas;
pub mod cli;
pub mod client;
pub mod client_step;
pub mod clock;
pub mod config;
pub mod disk;
pub mod expect;
pub mod fasthash;
pub mod faults;
pub mod fields;
pub mod fnv;
pub mod group_client;
pub mod group_invariants;
pub mod history;
pub mod invariants;
pub mod modes;
pub mod net;
pub mod plots;
pub mod queue;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod search;
pub mod shrink;
pub mod slots;
pub mod swarm;
pub mod sweep;
pub mod time;
pub mod topic;
pub mod trace;
pub mod txn_client;
pub mod txn_pipeline;
pub mod viewer;
pub mod violation;
pub mod world;

pub use world::{realised_schedule, run, run_recorded, SimError, BUG_NAMES};

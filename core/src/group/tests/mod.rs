//! Tests of the group coordinator and consumer: a coordinator-level harness driven by raw
//! requests (`harness`, `coordinator_script`), a small deterministic world wiring real
//! `GroupConsumer`s to a coordinator and a data topic (`world`, `consumer_script`), and
//! property tests over random schedules (`props`).

mod consumer_script;
mod coordinator_script;
mod delete_script;
mod harness;
mod props;
mod txn_script;
mod world;

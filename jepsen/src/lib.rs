//! # skein-jepsen: client histories and the checker that judges them
//!
//! A history is a JSON Lines file of client operations (see `docs/history.md`), written by
//! the simulator or by tests against a real cluster. The checker reads it once, indexes
//! sends and reads per partition, and reports Kafka-style anomalies by name.

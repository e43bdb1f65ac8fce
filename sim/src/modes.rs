//! How the workload's clients ask for durability: the producers' [`Acks`] and the group
//! members' [`CommitMode`]. A ground-floor module: the configuration, the scenario format
//! and the clients all name these without importing each other.

/// Acknowledgement level asked by producers: the produce request's own.
pub use skein_core::message::Acks;

/// How a member commits after processing a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitMode {
    /// `commit_sync`: wait for the answer (retried until the request timeout) before the
    /// next poll.
    Sync,
    /// `commit_async`: one attempt, and poll on without waiting.
    Async,
    /// No commit by the application: the consumer auto-commits from `poll` every
    /// [`AUTO_COMMIT_INTERVAL`](crate::group_client::AUTO_COMMIT_INTERVAL) what earlier polls returned, and before giving partitions
    /// up (Kafka's `enable.auto.commit`).
    Auto,
}

impl CommitMode {
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "sync" => Some(CommitMode::Sync),
            "async" => Some(CommitMode::Async),
            "auto" => Some(CommitMode::Auto),
            _ => None,
        }
    }

    /// The name [`Self::from_name`] reads (scenario files, `--group-commit`).
    pub fn name(self) -> &'static str {
        match self {
            CommitMode::Sync => "sync",
            CommitMode::Async => "async",
            CommitMode::Auto => "auto",
        }
    }
}

/// What the producers do (`--workload`, scenario `[workload] kind`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Workload {
    /// Idempotent (or plain) producers, read_uncommitted consumers, group members.
    #[default]
    Plain,
    /// Transactional producers (begin, send, commit or abort) and read_committed
    /// consumers; no group members (see docs/simulation.md, "Transactional workload").
    Txn,
}

impl Workload {
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "plain" => Some(Workload::Plain),
            "txn" => Some(Workload::Txn),
            _ => None,
        }
    }

    /// The name [`Self::from_name`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Plain => "plain",
            Workload::Txn => "txn",
        }
    }
}

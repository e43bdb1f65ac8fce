//! An async host for core's sans-I/O [`GroupConsumer`]: it turns the consumer's
//! [`ConsumerOutput::Send`]s into frames to brokers, feeds the answers back with
//! `step`, and runs its `handle_timeout` at `poll_timeout`. The application (`skein consume
//! --group`) calls [`GroupClient::poll`] for records and commits what it has processed.
//!
//! Connections are a [`BrokerPool`]'s: one pipelined connection per broker (the consumer
//! has several requests in flight: a JoinGroup parked at the coordinator must not hold up
//! fetches or heartbeats), answers matched to requests by correlation id (the consumer's
//! own ids; a connection is this client's alone). Routing (`LeaderOf(tp)` through core's leader cache), the request/answer
//! translation and what an answer teaches the cache are core's (`skein_core::client::
//! group_wire`), shared with the simulator. A lost connection loses its requests: the
//! consumer times them out and retries.

use crate::broker_pool::BrokerPool;
use crate::config::ClusterAddresses;
use skein_core::client::group_wire;
use skein_core::client::{
    ConsumedRecord, ConsumerConfig, ConsumerEvent, ConsumerOutput, ConsumerRequest, Destination,
    GroupConsumer, Resolved,
};
use skein_core::message::*;
use skein_core::types::{Nanos, NodeId, TopicPartition};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// What went wrong hosting the consumer.
#[derive(Debug, thiserror::Error)]
pub enum GroupClientError {
    #[error("invalid consumer configuration: {0}")]
    Config(String),
    #[error(
        "the group consumer stopped: {0} (another consumer may use the same \
         --instance-id, or the members' assignors differ)"
    )]
    Fatal(String),
}

/// A `GroupConsumer` on real connections.
pub struct GroupClient {
    pool: BrokerPool,
    consumer: GroupConsumer,
    /// What each request in flight was, to turn its answer into a `ConsumerResponse`.
    pending: BTreeMap<u64, group_wire::Pending>,
    events: Vec<ConsumerEvent>,
}

impl GroupClient {
    pub fn new(
        cluster: ClusterAddresses,
        config: ConsumerConfig,
    ) -> Result<Self, GroupClientError> {
        let consumer =
            GroupConsumer::new(config).map_err(|e| GroupClientError::Config(e.to_string()))?;
        Ok(Self {
            pool: BrokerPool::new(cluster),
            consumer,
            pending: BTreeMap::new(),
            events: Vec::new(),
        })
    }

    fn now(&self) -> Nanos {
        self.pool.now()
    }

    pub fn consumer(&self) -> &GroupConsumer {
        &self.consumer
    }

    /// Subscribe and start joining.
    pub async fn subscribe(&mut self, topics: &[&str]) {
        let now = self.now();
        self.consumer.subscribe(now, topics);
        self.flush().await;
    }

    /// Events since the last call (assignments, revocations, commit results).
    pub fn take_events(&mut self) -> Vec<ConsumerEvent> {
        std::mem::take(&mut self.events)
    }

    /// Records ready now, or after waiting up to `wait` for answers and timers.
    pub async fn poll(&mut self, wait: Duration) -> Result<Vec<ConsumedRecord>, GroupClientError> {
        let until = Instant::now() + wait;
        loop {
            let now = self.now();
            let records = self.consumer.poll(now);
            self.flush().await;
            if let Some(fatal) = self.events.iter().find_map(|e| match e {
                ConsumerEvent::Fatal(e) => Some(e.to_string()),
                _ => None,
            }) {
                return Err(GroupClientError::Fatal(fatal));
            }
            if !records.is_empty() || Instant::now() >= until {
                return Ok(records);
            }
            self.wait_once(until).await;
        }
    }

    /// Commit explicit positions (each the next offset to read), retried by the consumer
    /// until its request timeout; the result arrives as a `CommitCompleted` event.
    pub async fn commit(&mut self, offsets: BTreeMap<TopicPartition, u64>) -> u64 {
        let now = self.now();
        let id = self.consumer.commit_offsets(now, offsets, true);
        self.flush().await;
        id
    }

    /// Runs the consumer (answers, timers) until `done` says so or `wait` passed; returns
    /// whether `done` said so.
    pub async fn run_until(
        &mut self,
        wait: Duration,
        mut done: impl FnMut(&GroupConsumer, &[ConsumerEvent]) -> bool,
    ) -> bool {
        let until = Instant::now() + wait;
        loop {
            if done(&self.consumer, &self.events) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            self.wait_once(until).await;
        }
    }

    /// Leave the group (LeaveGroup is sent; its answer awaited briefly).
    pub async fn close(&mut self) {
        let now = self.now();
        self.consumer.close(now);
        self.flush().await;
        let group_pending =
            |c: &Self| (c.pending.values()).any(|p| matches!(p, group_wire::Pending::Group));
        let until = Instant::now() + Duration::from_secs(2);
        while group_pending(self) && Instant::now() < until {
            self.wait_once(until).await;
        }
        self.pool.close();
    }

    /// Waits for one answer or the consumer's next timer (at most until `until`).
    async fn wait_once(&mut self, until: Instant) {
        let timer = self
            .consumer
            .poll_timeout()
            .map(|t| self.pool.instant(t))
            .map_or(until, |t| t.min(until));
        // Poll again soon even without a timer: buffered records may wait for `poll`.
        let timer = timer.min(Instant::now() + Duration::from_millis(50));
        match self.pool.recv_until(timer).await {
            Some((from, msg)) => {
                self.on_answer(from, msg);
                while let Some((from, msg)) = self.pool.try_recv() {
                    self.on_answer(from, msg);
                }
            }
            None => {
                let now = self.now();
                self.consumer.handle_timeout(now);
            }
        }
        self.flush().await;
    }

    /// Sends everything the consumer wants sent; keeps its events; refreshes leaders when
    /// the cache asks for it.
    async fn flush(&mut self) {
        loop {
            let outputs = self.consumer.poll_outputs();
            if outputs.is_empty() {
                break;
            }
            for out in outputs {
                match out {
                    ConsumerOutput::Event(e) => self.events.push(e),
                    ConsumerOutput::Send {
                        to,
                        correlation,
                        request,
                    } => self.send(to, correlation, request).await,
                }
            }
        }
        self.pool.refresh_leaders().await;
    }

    async fn send(&mut self, to: Destination, correlation: u64, request: ConsumerRequest) {
        if let Destination::LeaderOf(tp) = &to {
            self.pool.watch_topic(&tp.topic);
        }
        let node = match group_wire::route(&to, &request, &mut self.pool.leaders) {
            Resolved::AnyBroker => self.pool.any_broker(),
            Resolved::Node(n) => Some(n),
            Resolved::NoLeader(answer) => {
                // Answered at once; the consumer retries after its backoff, by when the
                // refresh this asked for may have found the leader.
                let now = self.now();
                self.consumer.step(now, correlation, answer);
                return;
            }
        };
        let (msg, pending) = group_wire::to_message(correlation, request);
        let Some(node) = node else {
            return; // no broker reachable: the consumer times the request out and retries
        };
        if self.pool.write(node, msg).await {
            self.pending.insert(correlation, pending);
        }
    }

    fn on_answer(&mut self, from: NodeId, msg: Message) {
        let now = self.now();
        let Some(correlation) = msg.response_correlation() else {
            return;
        };
        let Some(pending) = self.pending.remove(&correlation) else {
            return;
        };
        let name = msg.name();
        match group_wire::from_message(pending, Some(from), msg, &mut self.pool.leaders) {
            Some(response) => self.consumer.step(now, correlation, response),
            None => tracing::debug!(msg = name, "answer of an unexpected kind dropped"),
        }
    }
}

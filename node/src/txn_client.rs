//! An async host for core's sans-I/O [`TransactionalProducer`] (the machine the simulator
//! runs too): its sends go out through a [`BrokerPool`], answers come back through `step`,
//! and `handle_timeout` runs at `poll_timeout`. The application (`skein produce
//! --transactional-id`, `skein bench produce --transactional`) calls `init`, `begin`,
//! `send`, `send_offsets`, `commit` or `abort`, and each async call returns when the
//! producer says the operation ended (or failed).
//!
//! Routing: core's `txn_producer::route`, as in the simulator: `LeaderOf(tp)` through the
//! pool's leader cache (no leader known: answered at once as `NotLeader`, and the producer
//! sends it again after its backoff);
//! `AnyBroker` round-robin; `Node(n)` as named. A failed produce answer makes the cache look
//! again, since most such errors say the leader moved.

use crate::broker_pool::BrokerPool;
use crate::config::ClusterAddresses;
use skein_core::client::txn_producer::{
    self, from_message, TransactionalProducer, TxnClientError, TxnProducerConfig, TxnProducerEvent,
    TxnProducerOutput, TxnProducerRequest, TxnProducerResponse, TxnProducerState,
};
use skein_core::client::{Destination, Resolved};
use skein_core::controller::ProducerIdAndEpoch;
use skein_core::group::OffsetAndMetadata;
use skein_core::log::RecordBatch;
use skein_core::message::Message;
use skein_core::txn::TxnResult;
use skein_core::types::{NodeId, Offset, TopicPartition};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// What went wrong running a transaction.
#[derive(Debug, thiserror::Error)]
pub enum TxnHostError {
    /// The application asked for something the producer's state does not allow.
    #[error("{0}")]
    Refused(#[from] TxnClientError),
    /// The transaction cannot commit any more; abort it (and begin a new one).
    #[error("the transaction must be aborted: {0}")]
    Abortable(String),
    /// The producer is unusable (fenced by a newer instance of the transactional id, or
    /// refused for good).
    #[error("the transactional producer stopped: {0}")]
    Fatal(String),
    #[error("no answer within {0:?} (the brokers may be down; the transaction's outcome is unknown until the coordinator aborts it after transaction.timeout.ms)")]
    TimedOut(Duration),
}

/// A `TransactionalProducer` on real connections.
pub struct TxnClient {
    pool: BrokerPool,
    producer: TransactionalProducer,
    /// Requests in flight: the partition of a produce, so a failed answer refreshes leaders.
    pending: BTreeMap<u64, Option<TopicPartition>>,
    events: Vec<TxnProducerEvent>,
    /// Batches written in the open transaction: partition, base offset, records.
    written: Vec<(TopicPartition, Offset, u32)>,
    /// Batches sent in the open transaction and not yet acknowledged.
    unacked: usize,
}

impl TxnClient {
    pub fn new(cluster: ClusterAddresses, config: TxnProducerConfig) -> Self {
        Self {
            pool: BrokerPool::new(cluster),
            producer: TransactionalProducer::new(config),
            pending: BTreeMap::new(),
            events: Vec::new(),
            written: Vec::new(),
            unacked: 0,
        }
    }

    pub fn state(&self) -> &TxnProducerState {
        self.producer.state()
    }

    /// The producer id and epoch in use.
    pub fn producer(&self) -> Option<ProducerIdAndEpoch> {
        self.producer.producer()
    }

    /// `init_transactions`: fences every older instance of this transactional id (and ends
    /// its open transaction) and returns the producer id and epoch.
    pub async fn init(&mut self, wait: Duration) -> Result<ProducerIdAndEpoch, TxnHostError> {
        let now = self.pool.now();
        self.producer.init(now)?;
        self.flush().await;
        self.run_until(wait, |e| match e {
            TxnProducerEvent::Initialized(p) => Some(Ok(*p)),
            TxnProducerEvent::Fatal(why) => Some(Err(TxnHostError::Fatal(why.clone()))),
            _ => None,
        })
        .await
    }

    /// `begin_transaction` (local only).
    pub fn begin(&mut self) -> Result<(), TxnHostError> {
        self.written.clear();
        self.unacked = 0;
        Ok(self.producer.begin()?)
    }

    /// Adds `batch` for `tp` to the open transaction (sent at once; acknowledged before the
    /// commit goes out).
    pub async fn send(
        &mut self,
        tp: TopicPartition,
        batch: RecordBatch,
    ) -> Result<(), TxnHostError> {
        self.pool.watch_topic(&tp.topic);
        let now = self.pool.now();
        self.producer.send(now, tp, batch)?;
        self.unacked += 1;
        self.flush().await;
        Ok(())
    }

    /// Waits until every batch sent in the open transaction is acknowledged (written to
    /// the log, not yet visible to read_committed readers). A commit waits for this
    /// itself; an abort does not (unsent batches are dropped), so an application that
    /// wants aborted records to really sit in the log waits here first.
    pub async fn wait_written(&mut self, wait: Duration) -> Result<(), TxnHostError> {
        let until = Instant::now() + wait;
        while self.unacked > 0 {
            if let Some(r) = self.next_event(|e| match e {
                TxnProducerEvent::Abortable(why) => Some(Err(TxnHostError::Abortable(why.clone()))),
                TxnProducerEvent::Fatal(why) => Some(Err(TxnHostError::Fatal(why.clone()))),
                _ => None,
            }) {
                return r;
            }
            if self.unacked == 0 {
                break;
            }
            if Instant::now() >= until {
                return Err(TxnHostError::TimedOut(wait));
            }
            self.wait_once(until).await;
        }
        Ok(())
    }

    /// `send_offsets_to_transaction` for `group` (no generation check: a standalone
    /// application, not a group member).
    pub async fn send_offsets(
        &mut self,
        group: &str,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    ) -> Result<(), TxnHostError> {
        let now = self.pool.now();
        self.producer
            .send_offsets(now, group, None, None, offsets)?;
        self.flush().await;
        Ok(())
    }

    /// `commit_transaction`: returns the batches written (partition, base offset, records)
    /// once the coordinator has decided the commit.
    pub async fn commit(
        &mut self,
        wait: Duration,
    ) -> Result<Vec<(TopicPartition, Offset, u32)>, TxnHostError> {
        let now = self.pool.now();
        self.producer.commit(now)?;
        self.flush().await;
        self.end(wait, TxnResult::Commit).await?;
        Ok(std::mem::take(&mut self.written))
    }

    /// `abort_transaction`.
    pub async fn abort(&mut self, wait: Duration) -> Result<(), TxnHostError> {
        let now = self.pool.now();
        self.producer.abort(now)?;
        self.flush().await;
        self.written.clear();
        self.end(wait, TxnResult::Abort).await
    }

    async fn end(&mut self, wait: Duration, want: TxnResult) -> Result<(), TxnHostError> {
        let got = self
            .run_until(wait, |e| match e {
                TxnProducerEvent::Completed { result, .. } => Some(Ok(*result)),
                TxnProducerEvent::CommitFailed(why) | TxnProducerEvent::Abortable(why) => {
                    Some(Err(TxnHostError::Abortable(why.clone())))
                }
                TxnProducerEvent::Fatal(why) => Some(Err(TxnHostError::Fatal(why.clone()))),
                _ => None,
            })
            .await?;
        if got != want {
            // A commit the coordinator turned into an abort (e.g. the transaction timed out).
            return Err(TxnHostError::Abortable(format!(
                "the coordinator ended the transaction with {got:?}"
            )));
        }
        Ok(())
    }

    /// Takes the producer's events in order until `pick` finds one it wants (`Written`
    /// ones are kept for the commit's answer).
    fn next_event<T>(&mut self, mut pick: impl FnMut(&TxnProducerEvent) -> Option<T>) -> Option<T> {
        while !self.events.is_empty() {
            let e = self.events.remove(0);
            if let TxnProducerEvent::Written {
                tp,
                base_offset,
                records,
            } = &e
            {
                self.written.push((tp.clone(), *base_offset, *records));
                self.unacked = self.unacked.saturating_sub(1);
            }
            if let Some(r) = pick(&e) {
                return Some(r);
            }
        }
        None
    }

    /// Runs the producer until `pick` finds an event it wants, or `wait` passed.
    async fn run_until<T>(
        &mut self,
        wait: Duration,
        mut pick: impl FnMut(&TxnProducerEvent) -> Option<Result<T, TxnHostError>>,
    ) -> Result<T, TxnHostError> {
        let until = Instant::now() + wait;
        loop {
            if let Some(r) = self.next_event(&mut pick) {
                return r;
            }
            if Instant::now() >= until {
                return Err(TxnHostError::TimedOut(wait));
            }
            self.wait_once(until).await;
        }
    }

    /// Lets the producer work (answers, timers) for at most `d` (less if an answer came):
    /// what an application calls while it waits for something else, so requests the
    /// producer sends by itself (AddPartitionsToTxn, then the batch) go on meanwhile.
    pub async fn drive(&mut self, d: Duration) {
        self.wait_once(Instant::now() + d).await;
    }

    /// Waits for one answer or the producer's next timer (at most until `until`).
    async fn wait_once(&mut self, until: Instant) {
        let timer = self
            .producer
            .poll_timeout()
            .map(|t| self.pool.instant(t))
            .map_or(until, |t| t.min(until));
        // Leader refreshes have their own timers in the cache: look again soon.
        let timer = timer.min(Instant::now() + Duration::from_millis(50));
        match self.pool.recv_until(timer).await {
            Some((from, msg)) => {
                self.on_answer(from, msg);
                while let Some((from, msg)) = self.pool.try_recv() {
                    self.on_answer(from, msg);
                }
            }
            None => {
                let now = self.pool.now();
                self.producer.handle_timeout(now);
            }
        }
        self.flush().await;
    }

    /// Sends everything the producer wants sent; keeps its events.
    async fn flush(&mut self) {
        loop {
            let outputs = self.producer.poll_outputs();
            if outputs.is_empty() {
                break;
            }
            for out in outputs {
                match out {
                    TxnProducerOutput::Event(e) => self.events.push(e),
                    TxnProducerOutput::Send {
                        to,
                        correlation,
                        request,
                    } => self.send_request(to, correlation, request).await,
                }
            }
        }
        self.pool.refresh_leaders().await;
    }

    async fn send_request(
        &mut self,
        to: Destination,
        correlation: u64,
        request: TxnProducerRequest,
    ) {
        if let Destination::LeaderOf(tp) = &to {
            self.pool.watch_topic(&tp.topic);
        }
        let node = match txn_producer::route(&to, &mut self.pool.leaders) {
            Resolved::AnyBroker => self.pool.any_broker(),
            Resolved::Node(n) => Some(n),
            Resolved::NoLeader(answer) => {
                let now = self.pool.now();
                self.producer.step(now, correlation, answer);
                return;
            }
        };
        let Some(node) = node else {
            return; // the producer times the request out and sends it again
        };
        let msg = match self.producer.to_message(correlation, &request) {
            Ok(m) => m,
            Err(e) => {
                // Only an unencodable batch: the producer's timeout gives up on it.
                tracing::warn!(error = %e, "cannot encode a transactional batch");
                return;
            }
        };
        let tp = match request {
            TxnProducerRequest::Produce { tp, .. } => Some(tp),
            _ => None,
        };
        if self.pool.write(node, msg).await {
            self.pending.insert(correlation, tp);
        }
    }

    fn on_answer(&mut self, _from: NodeId, msg: Message) {
        let now = self.pool.now();
        let Some((correlation, response)) = from_message(msg) else {
            return;
        };
        let Some(tp) = self.pending.remove(&correlation) else {
            return;
        };
        if let (Some(_), TxnProducerResponse::Produce(Err(_))) = (&tp, &response) {
            self.pool.leaders.invalidate();
        }
        self.producer.step(now, correlation, response);
    }
}

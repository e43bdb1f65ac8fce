//! Where each partition's leader is, as a client knows it: a cache filled from broker
//! metadata answers, with the refresh schedule (when to ask again) beside it; and the
//! controller's own view, which a producer consults before acting on a sequence error.

use crate::controller::{MetadataDelta, MetadataImage};
use crate::message::{ConsumerFetchError, MetadataRequest, MetadataResponse};
use crate::types::{LeaderEpoch, Nanos, NodeId, TopicPartition};
use std::collections::BTreeMap;

/// Partition leaders as last heard from brokers, and when to ask again.
///
/// Learning is epoch-monotone: an answer from a lagging broker never replaces a newer view
/// (it would send requests back to a deposed leader). A host marks the cache stale when a
/// broker says it is not the leader, or a request to the leader timed out; `poll_refresh`
/// then asks for one metadata request, at most every `min_interval`, and again after
/// `timeout` if no answer came.
#[derive(Clone, Debug)]
pub struct LeaderCache {
    leaders: BTreeMap<TopicPartition, (Option<NodeId>, LeaderEpoch)>,
    /// Correlation and send time of the refresh in flight.
    pending: Option<(u64, Nanos)>,
    stale: bool,
    last_request: Option<Nanos>,
    timeout: Nanos,
    min_interval: Nanos,
    /// Bumped by every call that may change a leader: a driver mirroring leaders (the
    /// simulator's clients) refreshes its copy when this moved, not by its own list of
    /// which answers teach the cache.
    version: u64,
}

impl LeaderCache {
    /// An empty cache: a refresh in flight is given up after `timeout`, and refreshes are at
    /// least `min_interval` apart.
    pub fn new(timeout: Nanos, min_interval: Nanos) -> Self {
        Self {
            leaders: BTreeMap::new(),
            pending: None,
            stale: false,
            last_request: None,
            timeout,
            min_interval,
            version: 0,
        }
    }

    /// Moves whenever a leader may have changed (see the field).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The leader of `tp`, if one is known.
    pub fn leader(&self, tp: &TopicPartition) -> Option<NodeId> {
        self.leaders.get(tp).and_then(|l| l.0)
    }

    /// Whether any of `tps` has no known leader.
    pub fn any_missing<'a>(&self, mut tps: impl Iterator<Item = &'a TopicPartition>) -> bool {
        tps.any(|tp| self.leader(tp).is_none())
    }

    /// Asks for a refresh at the next opportunity.
    pub fn invalidate(&mut self) {
        self.stale = true;
    }

    /// Learns the leaders in a metadata answer (and ends the refresh it answers).
    pub fn learn(&mut self, r: &MetadataResponse) {
        if self.pending.map(|(c, _)| c) == Some(r.correlation) {
            self.pending = None;
        }
        for pm in &r.partitions {
            self.learn_leader(&pm.tp, pm.leader, pm.leader_epoch);
        }
    }

    /// Learns one partition's leader at `epoch` (ignored if an epoch as new is known).
    pub fn learn_leader(
        &mut self,
        tp: &TopicPartition,
        leader: Option<NodeId>,
        epoch: LeaderEpoch,
    ) {
        self.version += 1;
        let e = self.leaders.entry(tp.clone()).or_insert((None, 0));
        if epoch >= e.1 {
            *e = (leader, epoch);
        }
    }

    /// Forgets `tp`'s leader and asks for a refresh. A `hint` from the broker that refused
    /// (`NotLeader { leader }`) is taken at once when it names another broker.
    pub fn not_leader(&mut self, tp: &TopicPartition, from: Option<NodeId>, hint: Option<NodeId>) {
        self.version += 1;
        let e = self.leaders.entry(tp.clone()).or_insert((None, 0));
        e.0 = hint.filter(|h| Some(*h) != from);
        self.stale = true;
    }

    /// What a failed read says about the cache: every error but a storage error or an
    /// offset below the log start may mean the broker asked is no longer the leader.
    pub fn on_fetch_error(
        &mut self,
        tp: &TopicPartition,
        from: Option<NodeId>,
        e: &ConsumerFetchError,
    ) {
        match e {
            ConsumerFetchError::NotLeader { leader, .. } => self.not_leader(tp, from, *leader),
            ConsumerFetchError::Storage(_) => {}
            // The leader answered for its log: the cursor handles it, no refresh.
            ConsumerFetchError::DivergingEpoch { .. } => {}
            ConsumerFetchError::OffsetOutOfRange {
                offset,
                log_start_offset,
                ..
            } if offset < log_start_offset => {}
            _ => self.not_leader(tp, from, None),
        }
    }

    /// A metadata request for `topics` if one is due at `now` (a leader of interest is
    /// missing, or the cache was marked stale), numbered `correlation`.
    #[inline]
    pub fn poll_refresh(
        &mut self,
        now: Nanos,
        correlation: u64,
        topics: &[String],
        missing: bool,
    ) -> Option<MetadataRequest> {
        // Asked after every client step; nearly always nothing is pending and nothing
        // wanted, answered here without a call.
        if self.pending.is_none() && !(self.stale || missing) {
            return None;
        }
        self.refresh_due(now, correlation, topics, missing)
    }

    /// [`Self::poll_refresh`] when a request is pending or wanted.
    #[inline(never)]
    fn refresh_due(
        &mut self,
        now: Nanos,
        correlation: u64,
        topics: &[String],
        missing: bool,
    ) -> Option<MetadataRequest> {
        if let Some((_, sent)) = self.pending {
            if now < sent + self.timeout {
                return None;
            }
            self.pending = None;
        }
        if !(self.stale || missing) {
            return None;
        }
        if self
            .last_request
            .is_some_and(|last| now < last + self.min_interval)
        {
            return None;
        }
        self.pending = Some((correlation, now));
        self.last_request = Some(now);
        self.stale = false;
        Some(MetadataRequest {
            correlation,
            topics: Some(topics.to_vec()),
        })
    }

    /// When `poll_refresh` may next have something to send (`missing` as there).
    pub fn next_refresh(&self, missing: bool) -> Option<Nanos> {
        if let Some((_, sent)) = self.pending {
            return Some(sent + self.timeout);
        }
        (self.stale || missing).then(|| self.last_request.map_or(0, |l| l + self.min_interval))
    }
}

/// The controller's metadata image, pulled in pages with `FetchMetadata` and kept up to date
/// by deltas: the authority on who leads a partition.
#[derive(Clone, Debug, Default)]
pub struct ControllerView {
    image: MetadataImage,
}

impl ControllerView {
    pub fn new() -> Self {
        Self::default()
    }

    /// The request that pulls what this view has not seen yet.
    pub fn request(&self) -> crate::controller::ControllerRequest {
        crate::controller::ControllerRequest::FetchMetadata {
            from_offset: self.image.next_offset,
        }
    }

    /// Applies one page; `Ok(true)` once the view has caught up with the controller (else
    /// send `request` again for the next page).
    pub fn apply(&mut self, delta: &MetadataDelta) -> Result<bool, String> {
        self.image.apply_delta(delta).map_err(|e| e.to_string())?;
        Ok(self.image.next_offset >= delta.end_offset || delta.records.is_empty())
    }

    /// The controller's leader of `tp` and its epoch (`None`: unknown partition).
    pub fn leader(&self, tp: &TopicPartition) -> Option<(Option<NodeId>, LeaderEpoch)> {
        let p = self.image.topic(&tp.topic)?.partitions.get(&tp.partition)?;
        Some((p.leader, p.leader_epoch))
    }

    pub fn image(&self) -> &MetadataImage {
        &self.image
    }
}

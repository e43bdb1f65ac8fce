//! Controlled shutdown (the broker side): before a broker stops it asks the controller to
//! move its leaderships to other ISR members and take it out of every ISR
//! (`ControllerRequest::ControlledShutdown`), keeps serving until its metadata image shows
//! the moves (so it answers `NotLeader` from then on and producers follow the new leader),
//! and finally syncs every log and the HW checkpoint. The host bounds the wait: a
//! controller that never answers only delays the stop.

use super::{Broker, BrokerEvent, Registration};
use crate::controller::{ControlledShutdownReply, ControllerError, ControllerRequest};
use crate::log::Storage;
use crate::node::NodeOutput;
use crate::replica::ReplicaRole;
use crate::types::{Nanos, Offset, TopicPartition};

/// Where a controlled shutdown stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShutdownPhase {
    /// Asked the controller at `sent_at` (resent after the controller timeout).
    Requested { sent_at: Nanos },
    /// The controller moved what it could; waiting for the image to reach `metadata_offset`.
    Moving {
        remaining: Vec<TopicPartition>,
        metadata_offset: Offset,
    },
    /// Nothing left to hand over: the host may sync and stop.
    Ready { remaining: Vec<TopicPartition> },
}

impl<S: Storage + Clone> Broker<S> {
    /// Start a controlled shutdown. An unregistered broker leads nothing the controller
    /// knows of, so it is ready at once.
    pub fn begin_controlled_shutdown(&mut self, now: Nanos) {
        if self.shutdown.is_some() {
            return;
        }
        match self.registration {
            Registration::Registered { .. } => {
                self.shutdown = Some(ShutdownPhase::Requested { sent_at: now });
                self.send_shutdown_request();
            }
            Registration::Unregistered { .. } => {
                self.shutdown = Some(ShutdownPhase::Ready {
                    remaining: self.led_partitions(),
                });
            }
        }
    }

    /// The controlled shutdown's phase, if one was begun.
    pub fn shutdown_phase(&self) -> Option<&ShutdownPhase> {
        self.shutdown.as_ref()
    }

    /// Whether the host may stop the broker now: every leadership that could move has
    /// moved and this broker's image knows it.
    pub fn ready_to_stop(&self) -> bool {
        matches!(self.shutdown, Some(ShutdownPhase::Ready { .. }))
    }

    /// fsync every hosted log and write the HW checkpoint: the last thing before exit.
    /// Returns the partitions whose log failed to sync (also reported as replica events).
    pub fn sync_all(&mut self) -> Vec<TopicPartition> {
        let failed: Vec<TopicPartition> = self
            .replicas
            .iter_mut()
            .filter_map(|(tp, r)| (!r.flush_log()).then(|| tp.clone()))
            .collect();
        self.checkpoint_high_watermarks();
        self.collect_replica_effects();
        failed
    }

    fn led_partitions(&self) -> Vec<TopicPartition> {
        self.replicas
            .iter()
            .filter(|(_, r)| r.role() == ReplicaRole::Leader)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    fn send_shutdown_request(&mut self) {
        if let Some(broker_epoch) = self.broker_epoch() {
            self.send_controller(ControllerRequest::ControlledShutdown {
                broker: self.id,
                broker_epoch,
            });
        }
    }

    /// Timer part: resend an unanswered request; move to Ready once the image caught up.
    pub(super) fn tick_shutdown(&mut self, now: Nanos) {
        match &self.shutdown {
            Some(ShutdownPhase::Requested { sent_at })
                if now >= sent_at + self.config.controller_timeout =>
            {
                self.shutdown = Some(ShutdownPhase::Requested { sent_at: now });
                self.send_shutdown_request();
            }
            Some(ShutdownPhase::Moving {
                remaining,
                metadata_offset,
            }) if self.image.next_offset >= *metadata_offset => {
                let remaining = remaining.clone();
                self.outputs
                    .push(NodeOutput::Broker(BrokerEvent::ReadyToStop {
                        remaining: remaining.clone(),
                    }));
                self.shutdown = Some(ShutdownPhase::Ready { remaining });
            }
            _ => {}
        }
    }

    pub(super) fn shutdown_deadline(&self) -> Option<Nanos> {
        match &self.shutdown {
            Some(ShutdownPhase::Requested { sent_at }) => {
                Some(sent_at + self.config.controller_timeout)
            }
            _ => None,
        }
    }

    pub(super) fn on_shutdown_reply(
        &mut self,
        now: Nanos,
        reply: Result<ControlledShutdownReply, ControllerError>,
    ) {
        if !matches!(self.shutdown, Some(ShutdownPhase::Requested { .. })) {
            return; // a duplicate answer
        }
        match reply {
            Ok(r) if r.broker == self.id => {
                self.shutdown = Some(ShutdownPhase::Moving {
                    remaining: r.remaining,
                    metadata_offset: r.metadata_offset,
                });
                // Pull the moves now rather than at the next heartbeat.
                if !self.heartbeat_in_flight {
                    self.send_heartbeat(now);
                }
                self.tick_shutdown(now);
            }
            Ok(_) => {}
            Err(e) => {
                // Stale epoch, unknown broker, storage failure: nothing will move; stop
                // as an uncontrolled shutdown (the session timeout moves the leaders).
                tracing::warn!(error = %e, "controlled shutdown refused");
                let remaining = self.led_partitions();
                self.outputs
                    .push(NodeOutput::Broker(BrokerEvent::ReadyToStop {
                        remaining: remaining.clone(),
                    }));
                self.shutdown = Some(ShutdownPhase::Ready { remaining });
            }
        }
    }
}

//! One Kafka connection's conversation with the local broker's state machine: Skein
//! requests out with fresh correlation ids, answers matched back by correlation (a reply
//! to a request this connection gave up on is dropped).

use super::Ctx;
use crate::runtime::LocalConn;
use skein_core::message::Message;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub struct Session {
    pub ctx: Arc<Ctx>,
    local: LocalConn,
    next_correlation: u64,
}

impl Session {
    pub fn new(ctx: Arc<Ctx>) -> Self {
        let local = ctx.local.connect();
        Self {
            ctx,
            local,
            next_correlation: 1,
        }
    }

    /// A fresh correlation id for the next Skein request.
    pub fn correlation(&mut self) -> u64 {
        let c = self.next_correlation;
        self.next_correlation += 1;
        c
    }

    /// Sends `requests` without waiting (acks = 0 produce).
    pub async fn send_all(&mut self, requests: Vec<Message>) {
        for msg in requests {
            if !self.local.send(msg).await {
                return;
            }
        }
    }

    /// Sends `requests` and collects their answers by correlation until all are in or
    /// `timeout` passes; unanswered ones are missing from the map.
    pub async fn call_all(
        &mut self,
        requests: Vec<Message>,
        timeout: Duration,
    ) -> BTreeMap<u64, Message> {
        let mut waiting: Vec<u64> = Vec::new();
        for msg in requests {
            if let Some(c) = msg.request_correlation() {
                waiting.push(c);
            }
            if !self.local.send(msg).await {
                return BTreeMap::new();
            }
        }
        let mut answers = BTreeMap::new();
        let deadline = tokio::time::Instant::now() + timeout;
        while answers.len() < waiting.len() {
            // (madsim's time module has `timeout` but no `timeout_at`.)
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let msg = match tokio::time::timeout(left, self.local.recv()).await {
                Ok(Some(msg)) => msg,
                Ok(None) | Err(_) => break,
            };
            match msg.response_correlation() {
                Some(c) if waiting.contains(&c) => {
                    answers.insert(c, msg);
                }
                _ => tracing::debug!(msg = msg.name(), "kafka: stale answer dropped"),
            }
        }
        answers
    }

    /// One request, one answer (None: no answer within `timeout`).
    pub async fn call(&mut self, request: Message, timeout: Duration) -> Option<Message> {
        let c = request.request_correlation();
        let mut answers = self.call_all(vec![request], timeout).await;
        c.and_then(|c| answers.remove(&c))
    }
}

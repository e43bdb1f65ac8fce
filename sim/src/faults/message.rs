//! Precise message faults (issue 52): "delay, duplicate or drop the next message of this
//! kind from this sender". A scenario arms one at its `at`; it strikes once, on the first
//! message sent after that which matches, and is then spent.
//!
//! The kinds are the transaction protocol's messages (the ones whose late arrival KIP-890
//! is about), plus `any`.

use super::{ClientRef, NodeRef};
use skein_core::group::GroupRequest;
use skein_core::message::Message;
use skein_core::txn::TxnRequest;
use std::fmt;

/// What happens to the matching message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageAction {
    /// Held back: delivered `delay` after it was sent (not subject to the network's drop
    /// draw; a partition or a dead addressee at arrival still cuts it off).
    Delay,
    /// Delivered as the network delivers it, and a copy `delay` after it was sent.
    Duplicate,
    /// Lost.
    Drop,
}

impl MessageAction {
    /// The scenario kinds, one per action.
    pub const KINDS: &'static [&'static str] =
        &["message-delay", "message-duplicate", "message-drop"];

    pub fn from_kind(kind: &str) -> Option<Self> {
        Some(match kind {
            "message-delay" => MessageAction::Delay,
            "message-duplicate" => MessageAction::Duplicate,
            "message-drop" => MessageAction::Drop,
            _ => return None,
        })
    }

    /// The scenario kind (also the fault's name in traces and reports).
    pub fn kind(self) -> &'static str {
        Self::KINDS[self as usize]
    }
}

/// Which messages a message fault matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MessageKind {
    /// Any message at all.
    Any,
    /// `InitProducerId` (client -> transaction coordinator).
    InitProducerId,
    /// `AddPartitionsToTxn` (client -> coordinator; also a leader's KIP-890 `verify_only`).
    AddPartitions,
    /// `AddOffsetsToTxn` (client -> coordinator).
    AddOffsets,
    /// `EndTxn` (client -> coordinator).
    EndTxn,
    /// `TxnOffsetCommit` (client -> group coordinator).
    TxnOffsetCommit,
    /// `WriteTxnMarkers` (coordinator -> partition leader).
    TxnMarker,
    /// A `Produce` carrying a transactional batch (client -> partition leader).
    TxnProduce,
}

impl MessageKind {
    /// The scenario spellings, in declaration order.
    pub const NAMES: &'static [&'static str] = &[
        "any",
        "init-producer-id",
        "add-partitions",
        "add-offsets",
        "end-txn",
        "txn-offset-commit",
        "txn-marker",
        "txn-produce",
    ];

    pub fn from_name(s: &str) -> Option<Self> {
        use MessageKind::*;
        const ALL: [MessageKind; 8] = [
            Any,
            InitProducerId,
            AddPartitions,
            AddOffsets,
            EndTxn,
            TxnOffsetCommit,
            TxnMarker,
            TxnProduce,
        ];
        Self::NAMES.iter().position(|n| *n == s).map(|i| ALL[i])
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Whether `m` is a message of this kind.
    pub fn matches(self, m: &Message) -> bool {
        match (self, m) {
            (MessageKind::Any, _) => true,
            (MessageKind::TxnMarker, Message::WriteTxnMarker(_)) => true,
            // The transactional producer names its transactional id on every produce (the
            // leader's KIP-890 check needs it); an idempotent or plain one never does.
            (MessageKind::TxnProduce, Message::Produce(r)) => r.transactional_id.is_some(),
            (MessageKind::TxnOffsetCommit, Message::Group { request, .. }) => {
                matches!(**request, GroupRequest::TxnOffsetCommit(_))
            }
            (kind, Message::Txn { request, .. }) => matches!(
                (kind, &**request),
                (MessageKind::InitProducerId, TxnRequest::InitProducerId(_))
                    | (
                        MessageKind::AddPartitions,
                        TxnRequest::AddPartitionsToTxn(_)
                    )
                    | (MessageKind::AddOffsets, TxnRequest::AddOffsetsToTxn(_))
                    | (MessageKind::EndTxn, TxnRequest::EndTxn(_))
            ),
            _ => false,
        }
    }
}

/// Who sent the message a message fault matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MessageSender {
    /// A broker (or "the leader of p", resolved when the fault is armed) or a controller.
    Node(NodeRef),
    /// A producer or consumer (in the txn workload, `producer:N` is transactional id
    /// `txn-N`), followed to its new instance if it restarts or is replaced.
    Client(ClientRef),
    /// The transaction coordinator of this transactional id: the broker leading its
    /// `__transaction_state` partition when the fault is armed.
    TxnCoordinator(String),
}

impl MessageSender {
    /// Parses a scenario's `from`: a broker id (as a string), "controller", "leader[:P]",
    /// "producer:N", "consumer:N" or "coordinator:<transactional id>".
    pub fn parse(s: &str) -> Option<Self> {
        if let Some(id) = s.strip_prefix("coordinator:") {
            return (!id.is_empty()).then(|| MessageSender::TxnCoordinator(id.to_string()));
        }
        if let Some(c) = ClientRef::parse(s) {
            return Some(MessageSender::Client(c));
        }
        if let Some(l) = super::LeaderOf::parse(s) {
            return Some(MessageSender::Node(NodeRef::LeaderOf(l)));
        }
        if let Some(c) = super::ControllerTag::parse(s) {
            return Some(MessageSender::Node(NodeRef::Controller(c)));
        }
        s.parse()
            .ok()
            .map(|b| MessageSender::Node(NodeRef::Broker(b)))
    }
}

impl fmt::Display for MessageSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessageSender::Node(NodeRef::Broker(b)) => write!(f, "{b}"),
            MessageSender::Node(n) => write!(f, "{n}"),
            MessageSender::Client(c) => write!(f, "{c}"),
            MessageSender::TxnCoordinator(id) => write!(f, "coordinator:{id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_senders_parse() {
        for n in MessageKind::NAMES {
            assert_eq!(MessageKind::from_name(n).map(MessageKind::name), Some(*n));
        }
        assert_eq!(MessageKind::from_name("endtxn"), None);
        for k in MessageAction::KINDS {
            assert_eq!(
                MessageAction::from_kind(k).map(MessageAction::kind),
                Some(*k)
            );
        }
        assert_eq!(
            MessageSender::parse("producer:2"),
            Some(MessageSender::Client(ClientRef::Producer(2)))
        );
        assert_eq!(
            MessageSender::parse("3"),
            Some(MessageSender::Node(NodeRef::Broker(3)))
        );
        assert_eq!(
            MessageSender::parse("coordinator:txn-1"),
            Some(MessageSender::TxnCoordinator("txn-1".into()))
        );
        assert_eq!(
            MessageSender::parse("leader:1"),
            Some(MessageSender::Node(NodeRef::LeaderOf(
                super::super::LeaderOf(1)
            )))
        );
        assert_eq!(MessageSender::parse("coordinator:"), None);
        assert_eq!(MessageSender::parse("nobody"), None);
        for s in [
            "producer:2",
            "3",
            "coordinator:txn-1",
            "leader:1",
            "controller",
        ] {
            assert_eq!(MessageSender::parse(s).unwrap().to_string(), s);
        }
    }
}

//! Each controller invariant, broken by a made-up decision: the check names it.

use super::*;
use crate::controller::TopicConfig;

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

/// Brokers 1, 2, 3 (broker epochs 0, 1, 2) and topic `t` of one partition on [1, 2, 3],
/// led by 1 at epoch 1 with ISR `isr` and ELR `elr`.
fn image(isr: &[NodeId], elr: &[NodeId]) -> MetadataImage {
    let mut records: Vec<MetadataRecord> = (1..=3)
        .map(|b| MetadataRecord::BrokerRegistered {
            broker: b,
            incarnation: 1,
        })
        .collect();
    records.push(MetadataRecord::TopicCreated {
        name: "t".into(),
        topic_id: 7,
        config: TopicConfig {
            partitions: 1,
            replication_factor: 3,
            min_insync_replicas: 2,
            ..TopicConfig::default()
        },
    });
    records.push(changed(isr, elr, Some(1), 1, 1));
    MetadataImage::from_records(&records).expect("valid")
}

fn changed(
    isr: &[NodeId],
    elr: &[NodeId],
    leader: Option<NodeId>,
    leader_epoch: LeaderEpoch,
    partition_epoch: PartitionEpoch,
) -> MetadataRecord {
    MetadataRecord::PartitionChanged {
        tp: tp(),
        replicas: vec![1, 2, 3],
        isr: isr.to_vec(),
        elr: elr.to_vec(),
        last_known_elr: Vec::new(),
        leader,
        leader_epoch,
        partition_epoch,
    }
}

fn check(
    before: &MetadataImage,
    records: &[MetadataRecord],
    events: &[ControllerEvent],
) -> Result<(), ControllerCheckError> {
    let mut after = before.clone();
    for r in records {
        // Some made-up records are ones the image refuses: the check must name them too.
        let _ = after.apply(r);
    }
    check_decision(before, &after, records, events)
}

#[test]
fn clean_elections_and_isr_changes_pass() {
    let before = image(&[1, 2, 3], &[]);
    let shrink = changed(&[1, 2], &[], Some(1), 1, 2);
    let moved = changed(&[2], &[], Some(2), 2, 3);
    assert_eq!(check(&before, &[shrink, moved], &[]), Ok(()));
    // An ELR member may lead without an unclean election (KIP-966).
    let before = image(&[1], &[2]);
    assert_eq!(
        check(&before, &[changed(&[2], &[], Some(2), 2, 2)], &[]),
        Ok(())
    );
}

#[test]
fn an_unreported_election_from_outside_the_isr_is_caught() {
    let before = image(&[1, 2], &[]);
    let out = changed(&[3], &[], Some(3), 2, 2);
    assert_eq!(
        check(&before, std::slice::from_ref(&out), &[]),
        Err(ControllerCheckError::UnreportedUncleanElection {
            tp: tp(),
            leader: 3,
            leader_epoch: 2,
            isr: vec![1, 2],
            elr: vec![]
        })
    );
    let reported = ControllerEvent::UncleanLeaderElection {
        tp: tp(),
        leader: 3,
        leader_epoch: 2,
        previous_isr: vec![1, 2],
    };
    assert_eq!(check(&before, &[out], &[reported]), Ok(()));
}

#[test]
fn epochs_going_back_are_caught() {
    let before = image(&[1, 2, 3], &[]);
    let mut records = vec![changed(&[1, 2, 3], &[], Some(2), 3, 2)];
    records.push(changed(&[1, 2, 3], &[], Some(1), 2, 3));
    assert_eq!(
        check(&before, &records, &[]),
        Err(ControllerCheckError::LeaderEpochRegressed {
            tp: tp(),
            from: 3,
            to: 2
        })
    );
    assert_eq!(
        check(&before, &[changed(&[1, 2], &[], Some(1), 1, 1)], &[]),
        Err(ControllerCheckError::PartitionEpochNotAdvanced {
            tp: tp(),
            from: 1,
            to: 1
        })
    );
}

#[test]
fn malformed_partition_states_are_caught() {
    let before = image(&[1, 2, 3], &[]);
    let cases = [
        (
            changed(&[2, 3], &[], Some(1), 1, 2),
            ControllerCheckError::LeaderNotInIsr {
                tp: tp(),
                leader: 1,
                isr: vec![2, 3],
            },
        ),
        (
            changed(&[], &[], None, 2, 2),
            ControllerCheckError::EmptyIsr { tp: tp() },
        ),
        (
            changed(&[1, 4], &[], Some(1), 1, 2),
            ControllerCheckError::NotAReplica {
                tp: tp(),
                member: 4,
                replicas: vec![1, 2, 3],
            },
        ),
        (
            changed(&[1], &[1, 2], Some(1), 1, 2),
            ControllerCheckError::IsrElrOverlap {
                tp: tp(),
                member: 1,
            },
        ),
    ];
    for (record, error) in cases {
        assert_eq!(check(&before, &[record], &[]), Err(error));
    }
}

#[test]
fn a_fenced_broker_left_leading_is_caught() {
    let before = image(&[1, 2, 3], &[]);
    let fence = MetadataRecord::BrokerFenced {
        broker: 1,
        broker_epoch: 0,
    };
    assert_eq!(
        check(&before, std::slice::from_ref(&fence), &[]),
        Err(ControllerCheckError::FencedLeader {
            tp: tp(),
            broker: 1
        })
    );
    // Fencing it and moving its leadership in the same decision is what the controller does.
    let moved = changed(&[2, 3], &[], Some(2), 2, 2);
    assert_eq!(check(&before, &[fence, moved], &[]), Ok(()));
}

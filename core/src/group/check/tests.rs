//! Each group invariant, broken on purpose: the check names it.

use super::*;
use crate::group::protocol::OffsetAndMetadata;
use crate::group::state::{Committed, Member, Waiter};

fn tp(p: u32) -> TopicPartition {
    TopicPartition::new("t", p)
}

fn member(id: &str, assignment: &[u32]) -> Member {
    Member {
        id: id.into(),
        instance_id: None,
        session_timeout: 1,
        rebalance_timeout: 1,
        protocols: Vec::new(),
        assignment: assignment.iter().map(|p| tp(*p)).collect(),
        session_deadline: 1,
        join_waiter: None,
        sync_waiter: None,
    }
}

/// A Stable group of generation 3: a owns t-0, b owns t-1; t-0 committed at log offset 10.
fn stable() -> Group {
    let mut g = Group::new("g".into());
    g.state = GroupState::Stable;
    g.generation = 3;
    g.leader = Some("a".into());
    for m in [member("a", &[0]), member("b", &[1])] {
        g.members.insert(m.id.clone(), m);
    }
    g.offsets.insert(
        tp(0),
        Committed {
            value: OffsetAndMetadata::new(5),
            log_offset: 10,
        },
    );
    g
}

#[test]
fn a_stable_group_passes() {
    let g = stable();
    assert_eq!(g.check(), Ok(()));
    assert_eq!(g.check_since(&g.checkpoint()), Ok(()));
}

#[test]
fn broken_membership_rules_are_caught() {
    let mut g = stable();
    g.members.get_mut("b").unwrap().assignment.push(tp(0));
    assert_eq!(
        g.check(),
        Err(GroupCheckError::OwnedTwice {
            group: "g".into(),
            tp: tp(0)
        })
    );

    let mut g = stable();
    g.members.get_mut("a").unwrap().join_waiter = Some(Waiter {
        to: 1,
        correlation: 1,
    });
    assert!(matches!(
        g.check(),
        Err(GroupCheckError::JoinWaiterOutsideRebalance { ref member, .. }) if member == "a"
    ));

    let mut g = stable();
    g.leader = Some("gone".into());
    assert!(matches!(
        g.check(),
        Err(GroupCheckError::LeaderNotAMember { .. })
    ));

    let mut g = stable();
    g.state = GroupState::Empty;
    assert_eq!(
        g.check(),
        Err(GroupCheckError::EmptyWithMembers {
            group: "g".into(),
            members: 2
        })
    );

    let mut g = stable();
    g.pending_commits.insert(tp(1), 0);
    assert_eq!(
        g.check(),
        Err(GroupCheckError::EmptyPendingCommit {
            group: "g".into(),
            tp: tp(1)
        })
    );
}

#[test]
fn a_generation_going_back_is_caught() {
    let mut g = stable();
    let before = g.checkpoint();
    g.generation = 2;
    assert_eq!(
        g.check_since(&before),
        Err(GroupCheckError::GenerationRegressed {
            group: "g".into(),
            from: 3,
            to: 2
        })
    );
}

#[test]
fn a_commit_replaced_by_an_older_one_or_lost_is_caught() {
    let mut g = stable();
    let before = g.checkpoint();
    // A later commit (a lower consumer offset is allowed: a seek back) replaces it.
    g.offsets.get_mut(&tp(0)).unwrap().log_offset = 12;
    g.offsets.get_mut(&tp(0)).unwrap().value = OffsetAndMetadata::new(2);
    assert_eq!(g.check_since(&before), Ok(()));
    g.offsets.get_mut(&tp(0)).unwrap().log_offset = 9;
    assert_eq!(
        g.check_since(&before),
        Err(GroupCheckError::CommitRegressed {
            group: "g".into(),
            tp: tp(0),
            from: 10,
            to: 9
        })
    );
    g.offsets.clear();
    assert_eq!(
        g.check_since(&before),
        Err(GroupCheckError::CommitLost {
            group: "g".into(),
            tp: tp(0),
            from: 10
        })
    );
}

//! Partition assignors: pure functions from the members' subscriptions (and, for the sticky
//! one, what each member owned) plus topic partition counts, to an assignment.
//!
//! * `range`: per topic, subscribers sorted by member id take consecutive ranges; balanced
//!   within one per topic (not across topics).
//! * `round_robin`: every partition, sorted by (topic, partition), dealt in turn to the
//!   sorted members that subscribe to its topic; balanced within one overall when all
//!   members subscribe to the same topics.
//! * `cooperative_sticky`: keep every valid owned partition, deal the unowned ones to the
//!   least-loaded eligible member, then move single partitions from the most to the least
//!   loaded member while they differ by two or more. With identical subscriptions that is
//!   balanced within one and moves the fewest partitions. Cooperative (KIP-429): a partition
//!   changing owner is withheld from its new owner this generation; the old owner revokes it
//!   and rejoins, and the next rebalance hands it over, so no partition has two owners.

use crate::group::protocol::{GenerationId, MemberId, Subscription};
use crate::types::TopicPartition;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Partition count of every topic the assignor may hand out.
pub type TopicPartitions = BTreeMap<String, u32>;
/// Member id -> the partitions it is assigned. Every input member is present.
pub type Assignment = BTreeMap<MemberId, BTreeSet<TopicPartition>>;

/// An assignor's view of one member.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AssignorMember {
    pub topics: BTreeSet<String>,
    /// Partitions the member held in `generation` (cooperative-sticky input).
    pub owned: BTreeSet<TopicPartition>,
    pub generation: Option<GenerationId>,
}

impl From<&Subscription> for AssignorMember {
    fn from(s: &Subscription) -> Self {
        Self {
            topics: s.topics.iter().cloned().collect(),
            owned: s.owned.iter().cloned().collect(),
            generation: s.generation,
        }
    }
}

/// How a consumer gives up partitions in a rebalance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RebalanceProtocol {
    /// Revoke everything before rejoining.
    Eager,
    /// Keep working on owned partitions; revoke only those the new assignment takes away.
    Cooperative,
}

/// The assignors a consumer may propose, by their protocol names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AssignorKind {
    Range,
    RoundRobin,
    CooperativeSticky,
}

impl AssignorKind {
    pub fn name(self) -> &'static str {
        match self {
            AssignorKind::Range => "range",
            AssignorKind::RoundRobin => "roundrobin",
            AssignorKind::CooperativeSticky => "cooperative-sticky",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [
            AssignorKind::Range,
            AssignorKind::RoundRobin,
            AssignorKind::CooperativeSticky,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }

    pub fn protocol(self) -> RebalanceProtocol {
        match self {
            AssignorKind::CooperativeSticky => RebalanceProtocol::Cooperative,
            _ => RebalanceProtocol::Eager,
        }
    }

    pub fn assign(
        self,
        members: &BTreeMap<MemberId, AssignorMember>,
        topics: &TopicPartitions,
    ) -> Assignment {
        match self {
            AssignorKind::Range => range(members, topics),
            AssignorKind::RoundRobin => round_robin(members, topics),
            AssignorKind::CooperativeSticky => cooperative_sticky(members, topics),
        }
    }
}

fn empty_assignment(members: &BTreeMap<MemberId, AssignorMember>) -> Assignment {
    members
        .keys()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect()
}

/// Every partition of a subscribed, known topic, sorted.
fn subscribed_partitions(
    members: &BTreeMap<MemberId, AssignorMember>,
    topics: &TopicPartitions,
) -> BTreeSet<TopicPartition> {
    let wanted: BTreeSet<&String> = members.values().flat_map(|m| m.topics.iter()).collect();
    wanted
        .into_iter()
        .filter_map(|t| topics.get(t).map(|n| (t, *n)))
        .flat_map(|(t, n)| (0..n).map(move |p| TopicPartition::new(t.clone(), p)))
        .collect()
}

/// Kafka's RangeAssignor.
pub fn range(members: &BTreeMap<MemberId, AssignorMember>, topics: &TopicPartitions) -> Assignment {
    let mut out = empty_assignment(members);
    for (topic, &n) in topics {
        let subs: Vec<&MemberId> = members
            .iter()
            .filter(|(_, m)| m.topics.contains(topic))
            .map(|(id, _)| id)
            .collect();
        if subs.is_empty() {
            continue;
        }
        let k = subs.len() as u32;
        let (per, extra) = (n / k, n % k);
        let mut next = 0;
        for (i, m) in subs.into_iter().enumerate() {
            let take = per + u32::from((i as u32) < extra);
            let set = out.get_mut(m).expect("member present");
            for p in next..next + take {
                set.insert(TopicPartition::new(topic.clone(), p));
            }
            next += take;
        }
        debug_assert_eq!(next, n);
    }
    out
}

/// Kafka's RoundRobinAssignor.
pub fn round_robin(
    members: &BTreeMap<MemberId, AssignorMember>,
    topics: &TopicPartitions,
) -> Assignment {
    let mut out = empty_assignment(members);
    let ids: Vec<&MemberId> = members.keys().collect();
    if ids.is_empty() {
        return out;
    }
    let mut cursor = 0usize;
    for tp in subscribed_partitions(members, topics) {
        // Next member in circular order subscribed to this topic; one exists by construction.
        for step in 0..ids.len() {
            let id = ids[(cursor + step) % ids.len()];
            if members[id].topics.contains(&tp.topic) {
                out.get_mut(id).expect("member present").insert(tp);
                cursor = (cursor + step + 1) % ids.len();
                break;
            }
        }
    }
    out
}

/// The balanced, sticky target assignment (before cooperative withholding).
pub fn sticky_target(
    members: &BTreeMap<MemberId, AssignorMember>,
    topics: &TopicPartitions,
) -> Assignment {
    let mut out = empty_assignment(members);
    let all = subscribed_partitions(members, topics);
    // 1. Valid claims: the partition exists, the member still subscribes to its topic, and no
    //    member claims it from a fresher generation (equal generations: lowest member id).
    let mut claim: BTreeMap<&TopicPartition, (&MemberId, Option<GenerationId>)> = BTreeMap::new();
    for (id, m) in members {
        for tp in &m.owned {
            if !all.contains(tp) || !m.topics.contains(&tp.topic) {
                continue;
            }
            match claim.get(tp) {
                Some((_, g)) if *g >= m.generation => {}
                _ => {
                    claim.insert(tp, (id, m.generation));
                }
            }
        }
    }
    for (tp, (id, _)) in &claim {
        out.get_mut(*id)
            .expect("member present")
            .insert((*tp).clone());
    }
    // 2. Unowned partitions to the least-loaded eligible member.
    for tp in all.iter().filter(|tp| !claim.contains_key(tp)) {
        let best = members
            .iter()
            .filter(|(_, m)| m.topics.contains(&tp.topic))
            .map(|(id, _)| id)
            .min_by_key(|id| (out[*id].len(), (*id).clone()));
        if let Some(id) = best {
            out.get_mut(id).expect("member present").insert(tp.clone());
        }
    }
    // 3. Balance: move one partition from a most-loaded member to a least-loaded eligible one
    //    while they differ by >= 2. Each move lowers the sum of squared loads: terminates.
    loop {
        let mut by_load: Vec<(&MemberId, usize)> =
            out.iter().map(|(id, s)| (id, s.len())).collect();
        by_load.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut moved = None;
        'search: for (from, fl) in &by_load {
            for (to, tl) in by_load.iter().rev() {
                if fl < &(tl + 2) {
                    break;
                }
                let topics_of_to = &members[*to].topics;
                if let Some(tp) = out[*from]
                    .iter()
                    .find(|tp| topics_of_to.contains(&tp.topic))
                {
                    moved = Some(((*from).clone(), (*to).clone(), tp.clone()));
                    break 'search;
                }
            }
        }
        match moved {
            Some((from, to, tp)) => {
                out.get_mut(&from).expect("present").remove(&tp);
                out.get_mut(&to).expect("present").insert(tp);
            }
            None => break,
        }
    }
    out
}

/// Kafka's CooperativeStickyAssignor: the sticky target, minus every partition that would
/// change hands this generation (it is given to its new owner in the follow-up rebalance,
/// once the previous owner has revoked it).
pub fn cooperative_sticky(
    members: &BTreeMap<MemberId, AssignorMember>,
    topics: &TopicPartitions,
) -> Assignment {
    let mut out = sticky_target(members, topics);
    let owners: BTreeMap<&TopicPartition, &MemberId> = members
        .iter()
        .flat_map(|(id, m)| m.owned.iter().map(move |tp| (tp, id)))
        .collect();
    for (id, set) in out.iter_mut() {
        set.retain(|tp| match owners.get(tp) {
            // Still owned by another live member: wait until it is revoked.
            Some(owner) => *owner == id,
            None => true,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn member(topics: &[&str]) -> AssignorMember {
        AssignorMember {
            topics: topics.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        }
    }

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("m{i:02}")).collect()
    }

    fn same_subs(n: usize, topics: &[&str]) -> BTreeMap<MemberId, AssignorMember> {
        ids(n).into_iter().map(|id| (id, member(topics))).collect()
    }

    fn owners(a: &Assignment) -> BTreeMap<TopicPartition, Vec<MemberId>> {
        let mut o: BTreeMap<TopicPartition, Vec<MemberId>> = BTreeMap::new();
        for (m, set) in a {
            for tp in set {
                o.entry(tp.clone()).or_default().push(m.clone());
            }
        }
        o
    }

    /// Every subscribed partition has exactly one owner, who subscribes to its topic.
    fn assert_exactly_once(
        a: &Assignment,
        members: &BTreeMap<MemberId, AssignorMember>,
        topics: &TopicPartitions,
    ) {
        let all = subscribed_partitions(members, topics);
        let o = owners(a);
        assert_eq!(o.keys().cloned().collect::<BTreeSet<_>>(), all);
        for (tp, ms) in &o {
            assert_eq!(ms.len(), 1, "{tp} owned by {ms:?}");
            assert!(members[&ms[0]].topics.contains(&tp.topic));
        }
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            members.keys().collect::<Vec<_>>()
        );
    }

    fn spread(a: &Assignment) -> usize {
        let loads: Vec<usize> = a.values().map(|s| s.len()).collect();
        loads.iter().max().unwrap_or(&0) - loads.iter().min().unwrap_or(&0)
    }

    fn with_owned(
        a: &Assignment,
        topics: &[&str],
        generation: u32,
    ) -> BTreeMap<MemberId, AssignorMember> {
        a.iter()
            .map(|(id, set)| {
                let mut m = member(topics);
                m.owned = set.clone();
                m.generation = Some(generation);
                (id.clone(), m)
            })
            .collect()
    }

    fn moved(before: &Assignment, after: &Assignment) -> usize {
        let b = owners(before);
        owners(after)
            .iter()
            .filter(|(tp, ms)| b.get(*tp).map(|o| o[0] != ms[0]).unwrap_or(false))
            .count()
    }

    #[test]
    fn range_matches_kafka_example() {
        let members = same_subs(2, &["a", "b"]);
        let topics: TopicPartitions = [("a".into(), 3), ("b".into(), 3)].into();
        let a = range(&members, &topics);
        let m0: Vec<String> = a["m00"].iter().map(|t| t.to_string()).collect();
        assert_eq!(m0, ["a-0", "a-1", "b-0", "b-1"]);
        assert_eq!(a["m01"].len(), 2);
    }

    #[test]
    fn cooperative_withholds_moving_partitions() {
        let topics: TopicPartitions = [("t".into(), 4)].into();
        let one = same_subs(1, &["t"]);
        let first = cooperative_sticky(&one, &topics);
        assert_eq!(first["m00"].len(), 4);
        // m01 joins: m00 keeps 2, gives up 2 which m01 only gets next round.
        let mut two = with_owned(&first, &["t"], 1);
        two.insert("m01".into(), member(&["t"]));
        let second = cooperative_sticky(&two, &topics);
        assert_eq!(second["m00"].len(), 2);
        assert!(second["m01"].is_empty());
        let third = cooperative_sticky(&with_owned(&second, &["t"], 2), &topics);
        assert_eq!(third["m00"], second["m00"]);
        assert_eq!(third["m01"].len(), 2);
    }

    fn arb_topics() -> impl Strategy<Value = TopicPartitions> {
        prop::collection::btree_map("[a-d]", 0u32..7, 1..4)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

        /// Heterogeneous subscriptions: each partition has exactly one eligible owner.
        #[test]
        fn all_assignors_assign_exactly_once(
            topics in arb_topics(),
            subs in prop::collection::vec(prop::collection::btree_set("[a-e]", 0..4), 1..7),
        ) {
            let members: BTreeMap<MemberId, AssignorMember> = subs.iter().enumerate()
                .map(|(i, s)| (format!("m{i:02}"), AssignorMember { topics: s.clone(), ..Default::default() }))
                .collect();
            for kind in [AssignorKind::Range, AssignorKind::RoundRobin, AssignorKind::CooperativeSticky] {
                let a = kind.assign(&members, &topics);
                assert_exactly_once(&a, &members, &topics);
            }
        }

        /// Identical subscriptions: round-robin and sticky balance within one overall, range
        /// within one per topic.
        #[test]
        fn balanced_within_one(topics in arb_topics(), n in 1usize..8) {
            let names: Vec<&str> = topics.keys().map(|s| s.as_str()).collect();
            let members = same_subs(n, &names);
            prop_assert!(spread(&round_robin(&members, &topics)) <= 1);
            prop_assert!(spread(&cooperative_sticky(&members, &topics)) <= 1);
            let r = range(&members, &topics);
            for t in topics.keys() {
                let per: Vec<usize> = r.values().map(|s| s.iter().filter(|tp| &tp.topic == t).count()).collect();
                prop_assert!(per.iter().max().unwrap() - per.iter().min().unwrap() <= 1);
            }
        }

        /// A member leaving moves only its own partitions; a member joining takes at most its
        /// fair share and nothing else changes hands. Two cooperative rounds reach balance, and
        /// no cooperative round hands a partition to a member while another still owns it.
        #[test]
        fn sticky_moves_are_minimal(topics in arb_topics(), n in 2usize..7, leaver in 0usize..7) {
            let names: Vec<&str> = topics.keys().map(|s| s.as_str()).collect();
            let total: usize = topics.values().map(|n| *n as usize).sum();
            let start = sticky_target(&same_subs(n, &names), &topics);

            // Leave.
            let gone = format!("m{:02}", leaver % n);
            let mut members = with_owned(&start, &names, 1);
            members.remove(&gone);
            let after = sticky_target(&members, &topics);
            assert_exactly_once(&after, &members, &topics);
            prop_assert!(spread(&after) <= 1);
            let mut kept_start = start.clone();
            let leaver_had = kept_start.remove(&gone).unwrap_or_default().len();
            prop_assert_eq!(moved(&start, &after), leaver_had, "only the leaver's partitions move");
            prop_assert_eq!(moved(&kept_start, &after), 0);

            // Join.
            let mut members = with_owned(&start, &names, 1);
            members.insert("zz".into(), member(&names));
            let after = sticky_target(&members, &topics);
            prop_assert!(spread(&after) <= 1);
            let fair = total.div_ceil(n + 1);
            prop_assert!(moved(&start, &after) <= fair);
            prop_assert_eq!(moved(&start, &after), after["zz"].len());

            // Cooperative: round 1 withholds, round 2 completes, never two owners.
            let r1 = cooperative_sticky(&members, &topics);
            for (id, set) in &r1 {
                for tp in set {
                    let prev = members.iter().find(|(_, m)| m.owned.contains(tp)).map(|(i, _)| i);
                    prop_assert!(prev.is_none() || prev == Some(id));
                }
            }
            let r2 = cooperative_sticky(&with_owned(&r1, &names, 2), &topics);
            assert_exactly_once(&r2, &members, &topics);
            prop_assert!(spread(&r2) <= 1);
        }
    }
}

//! Overlaying a scenario on a configuration: what it names replaces the flags' values.
//! Here rather than in `config`, so the configuration stays below the scenario format.

use super::Scenario;
use crate::config::SimConfig;

impl SimConfig {
    /// Overlays what a scenario sets.
    pub fn apply_scenario(&mut self, sc: &Scenario) {
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = sc.$f.clone() { self.$f = v; } )* };
        }
        set!(
            brokers,
            controllers,
            raft_max_entries_per_append,
            partitions,
            replication_factor,
            min_insync_replicas,
            unclean_leader_election,
            unclean_recovery_strategy,
            producers,
            consumers,
            group_id,
            group_commit,
            group_assignor,
            group_static,
            produce_rate,
            acks,
            idempotent,
            compression,
            workload,
            pipelines,
            txn_keep_epoch,
            txn_abort_in_flight,
            duration,
            liveness,
            network
        );
        // The group workload is opt-in for scenarios: an exact experiment gets only the
        // clients it names (and scenarios written before groups keep their runs).
        self.group_members = sc.group_members.unwrap_or(0);
        if sc.expect.is_some() {
            self.expect = sc.expect.clone();
        }
        match &sc.rates {
            Some(r) => {
                self.rates = r.clone();
                self.random_faults = r.per_second > 0.0;
            }
            // A scenario with an exact schedule and no rates runs exactly that schedule.
            None if !sc.schedule.is_empty() => self.random_faults = false,
            None => {}
        }
        self.schedule = sc.schedule.clone();
        self.scenario_name = sc.name.clone().or_else(|| Some(sc.file.clone()));
    }
}

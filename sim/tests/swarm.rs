//! Swarm testing (`--swarm`): each seed's fault mix is drawn from the seed, written into
//! its configuration, and carried into a shrunk finding's scenario file, which replays the
//! failure without `--swarm`.

mod common;

use skein_sim::cli::SimOpts;
use skein_sim::config::SimConfig;
use skein_sim::invariants::is_safety;
use skein_sim::scenario::Scenario;
use skein_sim::shrink::{scenario_toml, shrink};
use skein_sim::swarm::SwarmMix;
use skein_sim::time::SECS;

fn opts(swarm: bool, bug: &str) -> SimOpts {
    SimOpts {
        duration: Some(12 * SECS),
        liveness: Some(4 * SECS),
        produce_rate: Some(60.0),
        swarm,
        bug: vec![bug.into()],
        ..SimOpts::default()
    }
}

/// `--swarm` changes only the fault rates and the network, by the seed's mix; flags given
/// with it still pin what they name; without it nothing changes.
#[test]
fn the_swarm_flag_applies_the_seeds_mix_and_flags_still_win() {
    let plain = opts(false, "ack-before-isr");
    let swarm = opts(true, "ack-before-isr");
    for seed in [3, 4] {
        let p = plain.config(seed).unwrap();
        let s = swarm.config(seed).unwrap();
        let mix = SwarmMix::draw(seed);
        let mut expected = p.clone();
        mix.apply(&mut expected);
        assert_eq!(s, expected, "seed {seed}");
        assert_ne!(s.rates, p.rates);
        // The one-seed path and the sweep's (base once, then each seed) agree.
        assert_eq!(swarm.config_from(swarm.base().unwrap(), seed).unwrap(), s);
    }
    assert_ne!(
        swarm.config(3).unwrap().network,
        swarm.config(4).unwrap().network
    );
    let pinned = SimOpts {
        fault_weights: Some("crash=9".into()),
        max_down: Some(1),
        no_bit_flips: true,
        ..opts(true, "ack-before-isr")
    };
    for seed in 0..20 {
        let c = pinned.config(seed).unwrap();
        assert_eq!(
            (c.rates.crash, c.rates.max_down, c.rates.bit_flip),
            (9, 1, 0)
        );
    }
    assert!(pinned.flags().ends_with(" --swarm"), "{}", pinned.flags());
    let rate = SimOpts {
        fault_rate: Some(2.0),
        ..opts(true, "ack-before-isr")
    };
    let e = rate.config(1).unwrap_err().to_string();
    assert!(e.contains("--swarm") && e.contains("--fault-rate"), "{e}");
}

/// A swarm finding shrinks to a scenario file that carries the seed's mix (its weights
/// and network written out) and replays the failure with the same trace, no `--swarm`.
#[test]
fn a_shrunk_swarm_finding_replays_from_its_scenario_file() {
    let swarm = opts(true, "ack-before-isr");
    let (cfg, original) = (0..20)
        .map(|seed| {
            let c = swarm.config(seed).unwrap();
            let r = common::run(&c);
            (c, r)
        })
        .find(|(_, r)| r.failed_invariants().into_iter().any(is_safety))
        .expect("ack-before-isr fails some swarm seed of 0..20");
    let first = original
        .violations
        .iter()
        .find(|v| is_safety(v.invariant))
        .expect("a safety violation")
        .invariant;
    let shrunk = shrink(&cfg, Some(first), 12, &mut |_| {}).expect("shrinks");
    let text = scenario_toml(&shrunk.config, "shrunk", "test", shrunk.invariant);
    let mix = SwarmMix::draw(cfg.seed);
    // The mix's weights are in the file (those unlike the defaults), and its network.
    let off = skein_sim::faults::FaultRates::KINDS
        .iter()
        .find(|k| {
            mix.weight(k) == 0 && skein_sim::faults::FaultRates::default().weight(k) != Some(0)
        })
        .expect("some default-on kind is off in this mix");
    assert!(
        text.contains(&format!("{} = 0\n", off.replace('-', "_"))),
        "{off}\n{text}"
    );
    let sc = Scenario::parse("shrunk.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut replay = SimConfig::default();
    replay.apply_scenario(&sc);
    replay.seed = cfg.seed;
    replay.bugs = cfg.bugs.clone();
    assert_eq!(
        replay.network, mix.network,
        "the mix's network is in the file"
    );
    assert_eq!(replay.rates.weights(), shrunk.config.rates.weights());
    let r = common::run(&replay);
    assert_eq!(r.trace_hash, shrunk.report.trace_hash, "{text}");
    assert!(r.failed_invariants().contains(&first), "{r}");
}

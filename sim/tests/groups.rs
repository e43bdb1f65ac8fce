//! Seeded simulations with consumer-group members.

use skein_sim::config::SimConfig;
use skein_sim::time::SECS;

fn short(seed: u64) -> SimConfig {
    let mut c = SimConfig {
        seed,
        duration: 8 * SECS,
        liveness: 3 * SECS,
        partitions: 3,
        produce_rate: 40.0,
        ..SimConfig::default().with_fault_rate(2.0)
    };
    c.rates.bit_flip = 0;
    c
}

#[test]
#[ignore]
fn probe() {
    let n: u64 = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let s0: u64 = std::env::var("S0").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let t = std::time::Instant::now();
    let mut bad = 0;
    for seed in s0..s0 + n {
        let mut c = short(seed);
        if let Ok(m) = std::env::var("MEMBERS") { c.group_members = m.parse().unwrap(); }
        if let Ok(m) = std::env::var("COMMIT") { c.group_commit = skein_sim::group_client::CommitMode::from_name(&m).unwrap(); }
        if let Ok(m) = std::env::var("ASSIGNOR") { c.group_assignor = skein_core::group::AssignorKind::from_name(&m).unwrap(); }
        if let Ok(b) = std::env::var("BUG") { c.bugs = vec![b]; }
        let r = skein_sim::run(&c, None, None).unwrap();
        if !r.passed() {
            bad += 1;
            println!("seed {seed}: {:?}", r.failed_invariants());
            for v in r.violations.iter().take(3) {
                println!("   {} at {}: {}", v.invariant, v.at, v.detail);
            }
        }
    }
    println!("{bad} failing of {n}; wall {:?}", t.elapsed());
}

#[test]
#[ignore]
fn trace_one() {
    let seed: u64 = std::env::var("SEED").unwrap().parse().unwrap();
    let f = std::fs::File::create("/tmp/gsim/trace.jsonl").unwrap();
    let h = std::fs::File::create("/tmp/gsim/history.jsonl").unwrap();
    let mut c = short(seed);
    if let Ok(file) = std::env::var("SC") {
        let sc = skein_sim::scenario::Scenario::load(std::path::Path::new(&file)).unwrap();
        c = SimConfig::default();
        c.apply_scenario(&sc);
        c.seed = seed;
    }
    if let Ok(m) = std::env::var("MEMBERS") { c.group_members = m.parse().unwrap(); }
    if let Ok(m) = std::env::var("ASSIGNOR") { c.group_assignor = skein_core::group::AssignorKind::from_name(&m).unwrap(); }
    let r = skein_sim::run(&c, Some(Box::new(std::io::BufWriter::new(f))), Some(Box::new(std::io::BufWriter::new(h)))).unwrap();
    println!("{r}");
}

#[test]
#[ignore]
fn scen() {
    let file = std::env::var("SC").unwrap();
    let bug = std::env::var("BUG").ok();
    let sc = skein_sim::scenario::Scenario::load(std::path::Path::new(&file)).unwrap();
    for seed in 1..=5 {
        let mut c = SimConfig::default();
        c.apply_scenario(&sc);
        c.seed = seed;
        if let Some(b) = &bug { c.bugs = vec![b.clone()]; }
        let r = skein_sim::run(&c, None, None).unwrap();
        println!("seed {seed}: {:?} {:?}", r.failed_invariants(), r.group);
        for v in r.violations.iter().take(2) { println!("   {}: {}", v.invariant, v.detail); }
    }
}

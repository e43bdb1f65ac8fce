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
        let r = skein_sim::run(&short(seed), None, None).unwrap();
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
    let r = skein_sim::run(&short(seed), Some(Box::new(std::io::BufWriter::new(f))), Some(Box::new(std::io::BufWriter::new(h)))).unwrap();
    println!("{r}");
}

//! Seeded simulations with consumer-group members.

use skein_sim::config::SimConfig;
use skein_sim::time::SECS;

#[test]
fn probe() {
    for seed in [1u64, 2, 3] {
        let c = SimConfig {
            seed,
            duration: 12 * SECS,
            liveness: 5 * SECS,
            partitions: 3,
            produce_rate: 60.0,
            ..SimConfig::default()
        };
        let t = std::time::Instant::now();
        let r = skein_sim::run(&c, None, None).unwrap();
        println!("{r}\nwall {:?}", t.elapsed());
    }
}

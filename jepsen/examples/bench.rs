//! Checker benchmark: generate a large history from a correct log, then read and check it.
//!
//! ```text
//! cargo build --release -p skein-jepsen --example bench
//! target/release/examples/bench gen /tmp/h.jsonl 1000000
//! /usr/bin/time -v target/release/examples/bench check /tmp/h.jsonl
//! ```
//! `check` prints the read and check rates and its own peak RSS (VmHWM) against the file
//! size; the two steps are separate processes so the generator's memory is not counted.

use skein_jepsen::{
    check, read_history, AckPromise, AssignValue, CheckOptions, EventType, Function, HistoryWriter,
    PollValue, PolledRecord, SendValue, Value,
};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::time::Instant;

const PARTITIONS: u32 = 8;
const PRODUCERS: u64 = 8;
const CONSUMERS: u64 = 8;

/// splitmix64: a tiny seeded generator is all the workload needs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// With `faulty`, consumers skip a record 1% of the time and re-read one 1% of the time, so
/// the checker also meets gaps, skips and backwards steps at scale.
fn generate(path: &str, events: u64, seed: u64, faulty: bool) -> std::io::Result<()> {
    let mut rng = Rng(seed);
    let mut w = HistoryWriter::new(BufWriter::with_capacity(1 << 20, File::create(path)?));
    let mut logs: Vec<Vec<String>> = vec![Vec::new(); PARTITIONS as usize];
    // Each consumer reads two partitions; `next` is its position in each.
    let mut next: Vec<[u64; 2]> = vec![[0, 0]; CONSUMERS as usize];
    let assigned = |c: u64| [(c as u32 * 2) % PARTITIONS, (c as u32 * 2 + 1) % PARTITIONS];
    let mut seq = 0u64;
    let mut time = 0u64;
    for c in 0..CONSUMERS {
        let partitions = assigned(c).iter().map(|&p| ("t".into(), p)).collect();
        let v = Value::Assign(AssignValue {
            partitions,
            ..AssignValue::default()
        });
        w.write(time, PRODUCERS + c, EventType::Ok, Function::Assign, v)?;
    }
    while w.next_index() < events {
        time += 1 + rng.below(1000);
        if rng.below(2) == 0 {
            let process = rng.below(PRODUCERS);
            let partition = rng.below(PARTITIONS as u64) as u32;
            seq += 1;
            let value = format!("{process}-{seq}");
            // As the simulator writes them (format v2): every send names its acks level.
            let send = SendValue::new("t", partition, value.as_str()).with_acks(AckPromise::All);
            w.write(
                time,
                process,
                EventType::Invoke,
                Function::Send,
                Value::Send(send.clone()),
            )?;
            let log = &mut logs[partition as usize];
            match rng.below(50) {
                0 => {
                    w.write(
                        time + 1,
                        process,
                        EventType::Info,
                        Function::Send,
                        Value::Send(send),
                    )?;
                }
                _ => {
                    log.push(value);
                    let at = send.at(log.len() as u64 - 1);
                    w.write(
                        time + 1,
                        process,
                        EventType::Ok,
                        Function::Send,
                        Value::Send(at),
                    )?;
                }
            }
        } else {
            let c = rng.below(CONSUMERS);
            let process = PRODUCERS + c;
            w.write(
                time,
                process,
                EventType::Invoke,
                Function::Poll,
                Value::Null,
            )?;
            let mut records = Vec::new();
            for (slot, &p) in assigned(c).iter().enumerate() {
                let log = &logs[p as usize];
                let n = rng.below(4);
                let pos = &mut next[c as usize][slot];
                for _ in 0..n {
                    if faulty {
                        match rng.below(100) {
                            0 => *pos += 1,
                            1 => *pos = pos.saturating_sub(1),
                            _ => {}
                        }
                    }
                    if (*pos as usize) < log.len() {
                        records.push(PolledRecord::new("t", p, *pos, log[*pos as usize].as_str()));
                        *pos += 1;
                    }
                }
            }
            let v = Value::Poll(PollValue { records });
            w.write(time + 1, process, EventType::Ok, Function::Poll, v)?;
        }
    }
    w.into_inner()?;
    Ok(())
}

/// CPU time this (single-threaded) process has run, in seconds, from /proc (Linux): on a
/// shared machine wall time also counts waiting for a core.
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(f64::NAN, |ns| ns as f64 / 1e9)
}

/// Peak resident set size of this process, from /proc (Linux), in bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn run_check(path: &str, final_reads: bool) -> Result<(), Box<dyn std::error::Error>> {
    let size = std::fs::metadata(path)?.len();
    let (wall0, cpu0) = (Instant::now(), cpu_seconds());
    let events = read_history(BufReader::with_capacity(1 << 20, File::open(path)?))?;
    let (wall1, cpu1) = (Instant::now(), cpu_seconds());
    let report = check(&events, &CheckOptions::default().final_reads(final_reads));
    let (wall2, cpu2) = (Instant::now(), cpu_seconds());
    let n = events.len() as f64;
    println!("file: {path}, {} bytes, {} events", size, events.len());
    let phase = |name: &str, wall: f64, cpu: f64| {
        println!(
            "{name:<6} wall {wall:.3} s = {:>9.0} events/s; cpu {cpu:.3} s = {:>9.0} events/s, {:.0} MB/s",
            n / wall,
            n / cpu,
            size as f64 / 1e6 / cpu
        )
    };
    phase("read", (wall1 - wall0).as_secs_f64(), cpu1 - cpu0);
    phase("check", (wall2 - wall1).as_secs_f64(), cpu2 - cpu1);
    phase("total", (wall2 - wall0).as_secs_f64(), cpu2 - cpu0);
    if let Some(rss) = peak_rss() {
        println!(
            "peak RSS: {} bytes = {:.2}x the file",
            rss,
            rss as f64 / size as f64
        );
    }
    print!("{report}");
    drop(events);
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["gen", path, n] => generate(path, n.parse()?, 42, false)?,
        ["gen", path, n, seed] => generate(path, n.parse()?, seed.parse()?, false)?,
        ["gen-faulty", path, n] => generate(path, n.parse()?, 42, true)?,
        ["check", path] => run_check(path, false)?,
        ["check", path, "--final-reads"] => run_check(path, true)?,
        _ => {
            eprintln!(
                "usage: bench gen PATH EVENTS [SEED] | bench gen-faulty PATH EVENTS | bench check PATH [--final-reads]"
            );
            std::process::exit(2);
        }
    }
    Ok(())
}

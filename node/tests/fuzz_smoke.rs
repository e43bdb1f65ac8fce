//! CI smoke of the fuzz targets (docs/fuzzing.md), on the stable toolchain: each target's
//! harness (`skein_node::fuzzing`, the very functions the cargo-fuzz targets in tests/fuzz
//! call) over its whole kept corpus, then over a fixed number of seeded byte mutations
//! of it. A failure prints the input as hex, to keep as a regression case.

use skein_node::fuzzing::{Meter, TARGETS};
use std::path::PathBuf;

/// Counts allocations, so the harnesses check their allocation bounds here too.
#[global_allocator]
static METER: Meter = Meter;

const MUTATIONS: u64 = 20_000;
const SEED: u64 = 0x5eed_f022_2026_0045;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fuzz/corpus")
        .join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = entries.map(|e| e.expect("a corpus entry").path()).collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// Inputs the fuzzer once failed on (tests/fuzz/findings/<target>-*), kept as regressions.
fn findings(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fuzz/findings");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.map(|e| e.expect("a finding").path()).collect();
    paths.retain(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(target))
    });
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).expect("a finding's bytes"))
        .collect()
}

/// splitmix64: a fixed sequence from the seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values that sit on decoders' edges: zero, -1, sign bits, i16/i32 maxima.
const INTERESTING: &[u32] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0x8000,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
];

/// One to four libFuzzer-style edits of `input`: bit flips, byte and big-endian word
/// overwrites with edge values, inserts, deletes, duplicated runs, and splices of
/// another corpus entry.
fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut m = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(m.len() + 1);
        match rng.below(7) {
            0 if at < m.len() => m[at] ^= 1 << rng.below(8),
            1 if at < m.len() => m[at] = rng.next() as u8,
            2 if at + 4 <= m.len() => {
                let v = INTERESTING[rng.below(INTERESTING.len())];
                m[at..at + 4].copy_from_slice(&v.to_be_bytes());
            }
            3 => {
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                m.splice(at..at, bytes);
            }
            4 if at < m.len() => {
                let end = (at + 1 + rng.below(32)).min(m.len());
                m.drain(at..end);
            }
            5 if at < m.len() => {
                let end = (at + 1 + rng.below(64)).min(m.len());
                let run = m[at..end].to_vec();
                m.splice(at..at, run);
            }
            _ => {
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len() + 1);
                m.truncate(at);
                m.extend_from_slice(&other[from..]);
            }
        }
    }
    m
}

/// Prints the input being run if its harness panics.
struct Reporter<'a>(&'static str, &'a [u8]);

impl Drop for Reporter<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let hex: String = self.1.iter().map(|b| format!("{b:02x}")).collect();
            eprintln!("{} failed on input ({} bytes): {hex}", self.0, self.1.len());
        }
    }
}

fn smoke(name: &'static str) {
    let (_, harness) = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("a fuzz target");
    let corpus = corpus(name);
    assert!(!corpus.is_empty(), "tests/fuzz/corpus/{name} is empty");
    for input in corpus.iter().chain(&findings(name)) {
        let _r = Reporter(name, input);
        harness(input);
    }
    let mut rng = Rng(SEED ^ name.len() as u64);
    for _ in 0..MUTATIONS {
        let base = &corpus[rng.below(corpus.len())];
        let input = mutate(&mut rng, base, &corpus);
        let _r = Reporter(name, &input);
        harness(&input);
    }
}

#[test]
fn kafka_request_corpus_and_mutations() {
    smoke("kafka_request");
}

#[test]
fn skein_frame_corpus_and_mutations() {
    smoke("skein_frame");
}

#[test]
fn segment_recovery_corpus_and_mutations() {
    smoke("segment_recovery");
}

/// The table the smoke runs is every target the cargo-fuzz project builds.
#[test]
fn every_fuzz_target_is_smoked() {
    let manifest = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fuzz/Cargo.toml"),
    )
    .expect("tests/fuzz/Cargo.toml");
    let fuzz_bins = manifest.matches("[[bin]]").count();
    assert_eq!(fuzz_bins, TARGETS.len());
    for (name, _) in TARGETS {
        assert!(manifest.contains(&format!("name = \"{name}\"")), "{name}");
    }
}

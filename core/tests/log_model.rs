//! Model-based property test of the partition log on MemStorage: random sequences of
//! append / roll / truncate / retention / flush / crash (lose or tear unsynced data) /
//! reopen / disk full, checked against a simple in-memory model after every step.

use proptest::prelude::*;
use skein_core::log::*;
use skein_core::testing::MemStorage;
mod common;
use common::cases;

#[derive(Clone, Debug)]
struct MBatch {
    base: u64,
    values: Vec<Vec<u8>>,
    epoch: u32,
    ts: i64,
}

impl MBatch {
    fn next(&self) -> u64 {
        self.base + self.values.len() as u64
    }
}

#[derive(Clone, Debug)]
enum Op {
    Append { n: usize, len: usize, bump: bool },
    FollowerAppend { n: usize, len: usize, bump: bool },
    Roll,
    Truncate { frac: u16 },
    TruncateBelowStart { back: u8 },
    Retention,
    Flush,
    Crash { seed: u64, mode: u8 },
    Reopen,
    DiskFull { slack: u16, n: usize },
    Read { frac: u16, max_bytes: u16 },
    Timestamp { frac: u16 },
}

fn op() -> impl Strategy<Value = (Op, i64)> {
    let op = prop_oneof![
        10 => (1usize..5, 0usize..40, proptest::bool::weighted(0.15))
            .prop_map(|(n, len, bump)| Op::Append { n, len, bump }),
        4 => (1usize..5, 0usize..40, proptest::bool::weighted(0.15))
            .prop_map(|(n, len, bump)| Op::FollowerAppend { n, len, bump }),
        1 => Just(Op::Roll),
        2 => any::<u16>().prop_map(|frac| Op::Truncate { frac }),
        1 => any::<u8>().prop_map(|back| Op::TruncateBelowStart { back }),
        2 => Just(Op::Retention),
        3 => Just(Op::Flush),
        3 => (any::<u64>(), 0u8..3).prop_map(|(seed, mode)| Op::Crash { seed, mode }),
        1 => Just(Op::Reopen),
        1 => (0u16..400, 1usize..4).prop_map(|(slack, n)| Op::DiskFull { slack, n }),
        3 => (any::<u16>(), any::<u16>()).prop_map(|(frac, max_bytes)| Op::Read { frac, max_bytes }),
        1 => any::<u16>().prop_map(|frac| Op::Timestamp { frac }),
    ];
    (op, 0i64..40)
}

fn config() -> impl Strategy<Value = LogConfig> {
    (
        150u64..1500,
        20u64..400,
        proptest::option::of(300u64..3000),
        proptest::option::of(100i64..1500),
        proptest::option::of(50i64..600),
    )
        .prop_map(|(sb, ii, rb, rm, sm)| LogConfig {
            segment_bytes: sb,
            index_interval_bytes: ii,
            retention_bytes: rb,
            retention_ms: rm,
            segment_ms: sm,
            max_batch_bytes: 1 << 16,
            truncate_on_corruption: false,
            compaction: None,
        })
}

struct World {
    mem: MemStorage,
    cfg: LogConfig,
    log: Option<PartitionLog<MemStorage>>,
    model: Vec<MBatch>,
    start: u64,
    epoch: u32,
    now: i64,
    counter: u32,
}

const DIR: &str = "topic-3";

impl World {
    fn log(&mut self) -> &mut PartitionLog<MemStorage> {
        self.log.as_mut().unwrap()
    }
    fn leo(&self) -> u64 {
        self.model.last().map_or(self.start, |b| b.next())
    }
    fn make_batch(&mut self, n: usize, len: usize) -> (RecordBatch, Vec<Vec<u8>>) {
        let mut values = Vec::new();
        for _ in 0..n {
            self.counter += 1;
            let mut v = self.counter.to_be_bytes().to_vec();
            v.extend(std::iter::repeat_n(0xab, len));
            values.push(v);
        }
        let b = RecordBatch::from_values(self.now, values.iter().cloned());
        (b, values)
    }

    fn reopen(&mut self) -> RecoverySummary {
        drop(self.log.take());
        let (log, sum) = PartitionLog::open(self.mem.clone(), DIR, self.cfg.clone())
            .unwrap_or_else(|e| panic!("reopen failed: {e}"));
        assert!(sum.corruption.is_none(), "{sum:?}");
        self.log = Some(log);
        sum
    }

    /// After a reopen: the log must be a batch-aligned prefix of the model of at least
    /// `min_leo` offsets; the model is cut to match.
    fn reconcile(&mut self, min_leo: u64) {
        let leo = self.log().log_end_offset();
        let start = self.log().log_start_offset();
        assert_eq!(start, self.start, "log start moved on reopen");
        assert!(
            leo >= min_leo,
            "synced data lost: leo {leo} < flushed {min_leo}"
        );
        assert!(
            leo <= self.leo(),
            "log grew on reopen: {leo} > {}",
            self.leo()
        );
        if leo > self.start {
            assert!(
                self.model.iter().any(|b| b.next() == leo),
                "recovered end {leo} is not a batch boundary"
            );
        }
        self.model.retain(|b| b.next() <= leo);
    }

    fn check(&mut self) {
        let start = self.start;
        let leo = self.leo();
        let log = self.log.as_mut().unwrap();
        assert_eq!(log.log_start_offset(), start);
        assert_eq!(log.log_end_offset(), leo);
        assert!(log.flushed_offset() <= leo);
        // Full read equals the model.
        let mut got = Vec::new();
        let mut at = start;
        while at < leo {
            let bs = log.read(at, 300).unwrap();
            assert!(!bs.is_empty());
            for b in bs {
                assert_eq!(b.base_offset, at, "batches not dense");
                at = b.next_offset();
                got.push(b);
            }
        }
        assert!(log.read(leo, 100).unwrap().is_empty());
        assert!(matches!(
            log.read(leo + 1, 100),
            Err(LogError::OffsetOutOfRange { .. })
        ));
        assert_eq!(got.len(), self.model.len());
        for (g, m) in got.iter().zip(&self.model) {
            assert_eq!(g.base_offset, m.base);
            assert_eq!(g.partition_leader_epoch, m.epoch);
            let vals: Vec<_> = g.records.iter().map(|r| r.value.clone().unwrap()).collect();
            assert_eq!(vals, m.values);
        }
        // Epoch cache: increasing, inside [start, leo), and naming each batch's epoch.
        let entries = log.epoch_cache().entries().to_vec();
        for w in entries.windows(2) {
            assert!(w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset);
        }
        for e in &entries {
            assert!(
                e.start_offset >= start && e.start_offset < leo,
                "{entries:?} vs [{start},{leo})"
            );
        }
        for m in &self.model {
            assert_eq!(log.epoch_cache().epoch_at(m.base), Some(m.epoch));
            let i = entries.partition_point(|e| e.start_offset <= m.base);
            assert!(i > 0, "no epoch entry for batch at {}", m.base);
            assert_eq!(entries[i - 1].epoch, m.epoch, "{entries:?} batch {m:?}");
        }
    }

    /// Retention: only batches old or large enough go, and the log start stays on a batch
    /// boundary.
    fn retention(&mut self) {
        let now = self.now;
        let before = self.log().log_start_offset();
        let sum = self.log().apply_retention(now).unwrap();
        let after = self.log().log_start_offset();
        assert_eq!(sum.log_start_offset, after);
        assert!(after >= before);
        if after > before {
            let by_size = self
                .cfg
                .retention_bytes
                .is_some_and(|lim| self.log().size_bytes() >= lim);
            for b in self.model.iter().filter(|b| b.base < after) {
                let old = self.cfg.retention_ms.is_some_and(|ms| now - b.ts > ms);
                assert!(old || by_size, "batch {b:?} deleted without cause");
            }
            assert!(
                after == self.leo() || self.model.iter().any(|b| b.base == after),
                "log start {after} not at a batch boundary"
            );
            self.model.retain(|b| b.base >= after);
            self.start = after;
        }
    }

    /// A crash that keeps of each file what `mode` says (synced only, a random part beyond,
    /// all), then recovery: everything flushed survives.
    fn crash(&mut self, seed: u64, mode: u8) {
        let flushed = self.log().flushed_offset();
        drop(self.log.take());
        common::crash_with_mode(&self.mem, seed, mode);
        self.reopen();
        self.reconcile(flushed);
        assert_eq!(self.log().flushed_offset(), self.log().log_end_offset());
    }

    /// An append on a disk `slack` bytes from full: it lands, or fails and a restart
    /// reconciles whatever reached the disk.
    fn disk_full(&mut self, slack: u16, n: usize) {
        let used = self.mem.used_bytes();
        self.mem.set_capacity(Some(used + slack as u64));
        let (b, values) = self.make_batch(n, 30);
        let (epoch, now) = (self.epoch, self.now);
        let r = self.log().append_as_leader(b, epoch, now);
        self.mem.set_capacity(None);
        match r {
            Ok(info) => self.model.push(MBatch {
                base: info.base_offset,
                values,
                epoch,
                ts: now,
            }),
            Err(e) => {
                assert!(e.is_disk_full(), "{e:?}");
                // A restart reconciles whatever reached the disk.
                let base = self.leo();
                self.reopen();
                if self.log().log_end_offset() > base {
                    self.model.push(MBatch {
                        base,
                        values,
                        epoch,
                        ts: now,
                    });
                }
                self.reconcile(base);
            }
        }
    }

    /// Reads from an offset `frac` of the way through the log: whole batches, bounded by
    /// `max_bytes` and (read_until) by a high watermark.
    fn read(&mut self, frac: u16, max_bytes: u16) {
        let (s, l) = (self.start, self.leo());
        if l > s {
            let x = s + (l - s - 1) * frac as u64 / u16::MAX as u64;
            let bs = self.log().read(x, max_bytes as usize).unwrap();
            assert!(!bs.is_empty());
            assert!(bs[0].base_offset <= x && bs[0].next_offset() > x);
            let total: usize = bs.iter().map(|b| b.encoded_len()).sum();
            assert!(bs.len() == 1 || total <= max_bytes as usize);
            let raw = self.log().read_raw(x, max_bytes as usize).unwrap();
            assert_eq!(RecordBatch::decode_all(&raw).unwrap(), bs);
            // Bounded read (e.g. below a high watermark).
            let hw = x + (frac as u64 % 7);
            let below = self.log().read_until(x, max_bytes as usize, hw).unwrap();
            assert!(below.iter().all(|b| b.next_offset() <= hw));
            assert_eq!(&below[..], &bs[..below.len()]);
            if bs[0].next_offset() <= hw {
                assert!(!below.is_empty());
            }
        }
    }
}

fn run(cfg: LogConfig, ops: Vec<(Op, i64)>) {
    let mem = MemStorage::new();
    let (log, _) = PartitionLog::open(mem.clone(), DIR, cfg.clone()).unwrap();
    let mut w = World {
        mem,
        cfg,
        log: Some(log),
        model: Vec::new(),
        start: 0,
        epoch: 1,
        now: 1000,
        counter: 0,
    };
    for (op, dt) in ops {
        w.now += dt;
        match op {
            Op::Append { n, len, bump } => {
                if bump {
                    w.epoch += 1;
                }
                let (b, values) = w.make_batch(n, len);
                let (epoch, now) = (w.epoch, w.now);
                let info = w.log().append_as_leader(b, epoch, now).unwrap();
                assert_eq!(info.base_offset, w.leo());
                w.model.push(MBatch {
                    base: info.base_offset,
                    values,
                    epoch,
                    ts: now,
                });
            }
            Op::FollowerAppend { n, len, bump } => {
                if bump {
                    w.epoch += 1;
                }
                let (b, values) = w.make_batch(n, len);
                // As its leader wrote it: placed at the log end, in the current epoch.
                let b = b.at(w.leo()).in_epoch(w.epoch);
                let now = w.now;
                let info = w.log().append_as_follower(b, now).unwrap();
                assert_eq!(info.base_offset, w.leo());
                w.model.push(MBatch {
                    base: info.base_offset,
                    values,
                    epoch: info.leader_epoch,
                    ts: now,
                });
            }
            Op::Roll => w.log().roll().unwrap(),
            Op::Truncate { frac } => {
                let (s, l) = (w.start, w.leo());
                let x = s + (l - s) * frac as u64 / u16::MAX as u64;
                w.log().truncate_to(x).unwrap();
                if x <= s {
                    w.model.clear();
                    w.start = x;
                } else {
                    let cut = w.model.iter().position(|b| b.next() > x);
                    if let Some(i) = cut {
                        w.model.truncate(i);
                    }
                }
            }
            Op::TruncateBelowStart { back } => {
                let x = w.start.saturating_sub(back as u64 % 5);
                w.log().truncate_to(x).unwrap();
                w.model.clear();
                w.start = x;
            }
            Op::Retention => w.retention(),
            Op::Flush => {
                w.log().flush().unwrap();
                assert_eq!(w.log().flushed_offset(), w.leo());
            }
            Op::Crash { seed, mode } => w.crash(seed, mode),
            Op::Reopen => {
                let leo = w.leo();
                let sum = w.reopen();
                assert_eq!(sum.bytes_truncated, 0, "{sum:?}");
                w.reconcile(leo);
            }
            Op::DiskFull { slack, n } => w.disk_full(slack, n),
            Op::Read { frac, max_bytes } => w.read(frac, max_bytes),
            Op::Timestamp { frac } => {
                let q = 900 + (w.now - 900) * frac as i64 / u16::MAX as i64;
                let want = w.model.iter().find(|b| b.ts >= q).map(|b| b.base);
                assert_eq!(w.log().offset_for_timestamp(q).unwrap(), want, "ts {q}");
            }
        }
        w.check();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(192), ..ProptestConfig::default() })]

    #[test]
    fn log_matches_model(cfg in config(), ops in proptest::collection::vec(op(), 1..80)) {
        run(cfg, ops);
    }
}

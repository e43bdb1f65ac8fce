//! Peer repair from a log that refused to open. A log whose recovery met a corrupt batch
//! below its recovery point stays closed (its copy cannot be vouched for), but every other
//! batch in its segments may still be intact, and may be the only intact copy left of a
//! batch damaged on the replica that could lead (seed 20867: the last ISR member's batch at
//! 186 was damaged, the only other copy sat in a log that refused to open because of its
//! own damage at 196). So a broker answers a peer's `RepairFetch` from such a log too,
//! reading its segment files directly: the batch at the asked offset, framed by the length
//! fields, returned only if its CRC checks and its epoch is the asked one.

use crate::log::{RecordBatch, Storage, LOG_OVERHEAD};
use crate::message::RepairCopy;
use crate::types::{LeaderEpoch, Offset};

/// The intact batch at `offset` of epoch `epoch` in the segments of `dir`, if any. Never
/// `NotHeld`: a log that did not open cannot say what its log holds (the framing may be
/// broken before the batch), so "not found" is `Unreadable`, which makes no claim.
pub(super) fn copy_from_unopened<S: Storage>(
    storage: &mut S,
    dir: &str,
    offset: Offset,
    epoch: LeaderEpoch,
) -> RepairCopy {
    let Ok(names) = storage.list(dir) else {
        return RepairCopy::Unreadable;
    };
    for name in names.iter().filter(|n| n.ends_with(".log")) {
        let path = format!("{dir}/{name}");
        let Ok(bytes) = storage.read_all(&path) else {
            continue;
        };
        if let Some(batch) = find_batch(&bytes, offset) {
            if batch.partition_leader_epoch == epoch {
                return RepairCopy::Intact(batch);
            }
        }
    }
    RepairCopy::Unreadable
}

/// Walks the batches of one segment by their length fields and decodes the one starting
/// at `offset` (None if the walk cannot reach it or its CRC fails).
fn find_batch(bytes: &[u8], offset: Offset) -> Option<RecordBatch> {
    let mut pos = 0usize;
    while pos + LOG_OVERHEAD <= bytes.len() {
        let base = u64::from_be_bytes(bytes[pos..pos + 8].try_into().ok()?);
        let len = u32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().ok()?) as usize;
        let end = pos.checked_add(LOG_OVERHEAD + len)?;
        if len == 0 || end > bytes.len() || base > offset {
            return None;
        }
        if base == offset {
            return RecordBatch::decode(&bytes[pos..end]).ok().map(|(b, _)| b);
        }
        pos = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemStorage;

    fn batch(base: Offset, epoch: LeaderEpoch) -> RecordBatch {
        RecordBatch::from_values(0, vec![b"a".to_vec(), b"b".to_vec()])
            .at(base)
            .in_epoch(epoch)
    }

    #[test]
    fn an_intact_batch_behind_a_damaged_one_is_found_and_a_damaged_one_is_not() {
        let mut s = MemStorage::new();
        let mut bytes = Vec::new();
        for (base, epoch) in [(0, 1), (2, 1), (4, 2)] {
            bytes.extend(batch(base, epoch).encode().unwrap());
        }
        let first_len = batch(0, 1).encode().unwrap().len();
        // Damage the first batch's payload (its framing stays).
        bytes[first_len - 1] ^= 1;
        s.put_raw("d/00000000000000000000.log", &bytes);
        assert_eq!(
            copy_from_unopened(&mut s, "d", 2, 1),
            RepairCopy::Intact(batch(2, 1))
        );
        assert_eq!(
            copy_from_unopened(&mut s, "d", 0, 1),
            RepairCopy::Unreadable
        );
        assert_eq!(
            copy_from_unopened(&mut s, "d", 4, 1),
            RepairCopy::Unreadable,
            "epoch 2"
        );
        assert_eq!(
            copy_from_unopened(&mut s, "d", 6, 2),
            RepairCopy::Unreadable
        );
        assert_eq!(
            copy_from_unopened(&mut s, "x", 2, 1),
            RepairCopy::Unreadable
        );
    }
}

//! The fetch cursor: what one fetch answer hands a reader at `position`, and where its next
//! fetch starts.
//!
//! A broker returns whole batches, so the first may start before the position; it may
//! include leader-epoch markers (control batches), which are no application data; and
//! nothing at or above the high watermark is readable even if a broker sent it. The next
//! position is past the last record taken and past everything the broker read
//! (`ConsumerRecords::next_offset`, never beyond the HW), so a marker at the end of the
//! committed log never holds a reader back.

use crate::log::{Record, RecordBatch};
use crate::types::Offset;

/// Records taken from one fetch answer.
#[derive(Debug)]
pub struct Taken<'a> {
    /// (offset, batch, record) in offset order, every one at or above the position and
    /// below the HW, control records excluded.
    pub records: Vec<(Offset, &'a RecordBatch, &'a Record)>,
    /// Where the next fetch starts.
    pub next_offset: Offset,
}

/// Takes the records of `batches` a reader at `position` has not read yet. `next_offset` is
/// the broker's `ConsumerRecords::next_offset` (or `position` if unknown).
pub fn take_records(
    position: Offset,
    batches: &[RecordBatch],
    high_watermark: Offset,
    next_offset: Offset,
) -> Taken<'_> {
    let mut records = Vec::new();
    let mut next = position;
    for b in batches {
        for (o, r) in b.data_records() {
            if o < next || o >= high_watermark {
                continue;
            }
            records.push((o, b, r));
            next = o + 1;
        }
    }
    // Every record returned was taken, so skipping what the broker read past them
    // (leader-epoch markers) loses nothing.
    let next_offset = next.max(next_offset.min(high_watermark));
    Taken {
        records,
        next_offset,
    }
}

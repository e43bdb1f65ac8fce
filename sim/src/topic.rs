//! The workload's names: the topic every simulated client uses, its partitions, the
//! history's process ids, and record values as the history and the checks keep them. A
//! ground-floor module: clients, checks, viewer and tools share these without importing
//! each other.

use skein_core::TopicPartition;
use skein_jepsen::Text;

/// The topic every simulated client uses.
pub const TOPIC: &str = "sim";

/// [`TOPIC`] as history text: a constant, where converting the `&str` copied it into a
/// new `Text` for every history value.
pub(crate) const TOPIC_TEXT: Text = Text::const_new(TOPIC);

/// History process id of a client's work on one partition.
pub fn process_id(client: u64, partition: u32) -> u64 {
    client * 1000 + partition as u64
}

/// The client a history process id belongs to (the inverse of [`process_id`]).
pub fn client_of_process(process: u64) -> u64 {
    process / 1000
}

/// A record's value as the checks and the history keep it: its bytes as text (invalid
/// UTF-8 replaced, as `String::from_utf8_lossy` does), inline when short. Valid input is
/// one copy; `Text::from_utf8_lossy` went piece by piece and cost ~3x.
///
/// The workload's values are short ASCII: checked a word at a time (`is_ascii`, inlined),
/// they skip `from_utf8`'s general validation, an out-of-line call that was most of the
/// cost of a read record's value.
#[inline]
pub(crate) fn value_of(bytes: &[u8]) -> Text {
    if bytes.is_ascii() {
        // SAFETY: ASCII bytes are valid UTF-8.
        return Text::new(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    value_of_utf8(bytes)
}

#[cold]
fn value_of_utf8(bytes: &[u8]) -> Text {
    match std::str::from_utf8(bytes) {
        Ok(s) => Text::new(s),
        Err(_) => Text::new(String::from_utf8_lossy(bytes)),
    }
}

pub(crate) fn tp(p: u32) -> TopicPartition {
    TopicPartition::new(TOPIC, p)
}

#[cfg(test)]
mod tests {
    #[test]
    fn value_of_is_the_lossy_text() {
        let long = "p7-".repeat(20);
        let cases: [&[u8]; 7] = [
            b"",
            b"p1-2",
            long.as_bytes(),
            "caf\u{e9}-\u{1f980}".as_bytes(),
            b"p1-\xff",
            b"\xf0\x9f\xa6",
            b"\x7f\x80",
        ];
        for bytes in cases {
            assert_eq!(
                super::value_of(bytes),
                String::from_utf8_lossy(bytes),
                "{bytes:?}"
            );
        }
    }
}

//! Reading the big-endian key/value layouts that coordinators write to their internal topics
//! (`__consumer_offsets`, `__transaction_state`): one reader, each failure naming the field.

/// Why bytes could not be read as the layout says; each records module wraps it in its own
/// error type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    Truncated(&'static str),
    BadUtf8(&'static str),
    BadOptionTag(u8, &'static str),
    TrailingBytes(usize, &'static str),
}

/// A cursor over a record's key or value.
pub(crate) struct ByteReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> ByteReader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ReadError> {
        if self.buf.len() - self.pos < n {
            return Err(ReadError::Truncated(what));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ReadError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, ReadError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, ReadError> {
        self.array(what).map(u16::from_be_bytes)
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, ReadError> {
        self.array(what).map(u32::from_be_bytes)
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, ReadError> {
        self.array(what).map(u64::from_be_bytes)
    }

    /// u32 length + UTF-8.
    pub(crate) fn str(&mut self, what: &'static str) -> Result<String, ReadError> {
        let n = self.u32(what)? as usize;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| ReadError::BadUtf8(what))
    }

    /// u8 0 (absent) / 1 (present) + the value.
    pub(crate) fn opt<T>(
        &mut self,
        what: &'static str,
        read: impl FnOnce(&mut Self) -> Result<T, ReadError>,
    ) -> Result<Option<T>, ReadError> {
        match self.u8(what)? {
            0 => Ok(None),
            1 => read(self).map(Some),
            t => Err(ReadError::BadOptionTag(t, what)),
        }
    }

    /// A count about to drive a loop: each element takes at least `min_elem` bytes, so a
    /// corrupt huge count is caught before any allocation.
    pub(crate) fn count(
        &mut self,
        min_elem: usize,
        what: &'static str,
    ) -> Result<usize, ReadError> {
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min_elem) > self.buf.len() - self.pos {
            return Err(ReadError::Truncated(what));
        }
        Ok(n)
    }

    /// Everything read: trailing bytes are an error.
    pub(crate) fn finish(&self, what: &'static str) -> Result<(), ReadError> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            n => Err(ReadError::TrailingBytes(n, what)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_field_and_names_the_one_that_fails() {
        let mut b = vec![7u8, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9];
        b.extend_from_slice(&[0, 0, 0, 2, b'h', b'i', 1, 0, 0, 0, 1, b'x']);
        let mut r = ByteReader::new(&b);
        assert_eq!(r.u8("a"), Ok(7));
        assert_eq!(r.u16("b"), Ok(2));
        assert_eq!(r.u32("c"), Ok(3));
        assert_eq!(r.u64("d"), Ok(9));
        assert_eq!(r.str("e").as_deref(), Ok("hi"));
        assert_eq!(r.opt("f", |r| r.str("f")), Ok(Some("x".to_string())));
        assert_eq!(r.finish("value"), Ok(()));
        assert_eq!(
            ByteReader::new(&[0, 1]).u32("g"),
            Err(ReadError::Truncated("g"))
        );
        assert_eq!(
            ByteReader::new(&[2]).opt("h", |r| r.u8("h")),
            Err(ReadError::BadOptionTag(2, "h"))
        );
        assert_eq!(
            ByteReader::new(&[0, 0, 0, 9]).count(1, "i"),
            Err(ReadError::Truncated("i"))
        );
        assert_eq!(
            ByteReader::new(&[1]).finish("j"),
            Err(ReadError::TrailingBytes(1, "j"))
        );
        assert_eq!(
            ByteReader::new(&[0, 0, 0, 1, 0xff]).str("k"),
            Err(ReadError::BadUtf8("k"))
        );
    }
}

//! A bounds-checked big-endian reader for the slow paths of decoding, which name the
//! field that is wrong.

use super::header::DecodeError;

/// Bounds-checked big-endian reader: every read names the field it wanted.
pub(super) struct Cursor<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    #[inline]
    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    #[inline]
    pub(super) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated {
                what,
                pos: self.pos,
                need: n,
                have: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    #[inline]
    pub(super) fn arr<const N: usize>(
        &mut self,
        what: &'static str,
    ) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
    #[inline]
    pub(super) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.arr::<1>(what)?[0])
    }
    #[inline]
    pub(super) fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.arr(what)?))
    }
    #[inline]
    pub(super) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.arr(what)?))
    }
    #[inline]
    pub(super) fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.arr(what)?))
    }
    #[inline]
    pub(super) fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.arr(what)?))
    }
    #[inline]
    pub(super) fn opt_bytes(
        &mut self,
        what: &'static str,
    ) -> Result<Option<&'a [u8]>, DecodeError> {
        let len = i32::from_be_bytes(self.arr(what)?);
        match len {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError::Malformed(format!(
                "{what} length {n} is negative"
            ))),
            n => Ok(Some(self.take(n as usize, what)?)),
        }
    }
}

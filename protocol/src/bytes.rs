//! Byte helpers shared by the wire codec and the store codec: a bounds-checked big-endian
//! reader (both RocketMQ formats are big-endian throughout) and RocketMQ's masked CRC-32.
//!
//! Every read either returns the value and advances, or fails with [`Truncated`] and leaves
//! the position where it was; callers turn [`Truncated`] into their own error with `?`.

/// A read ran past the end of the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncated {
    /// Position the read needed to reach.
    pub needed: usize,
    /// Bytes there are.
    pub available: usize,
}

/// Reads big-endian integers and slices from `buf`, front to back.
#[derive(Debug)]
pub struct ByteReader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> ByteReader<'a> {
    /// A reader at position `at` of `buf`.
    #[must_use]
    pub fn new(buf: &'a [u8], at: usize) -> ByteReader<'a> {
        ByteReader { buf, at }
    }

    /// The current position.
    #[must_use]
    pub fn position(&self) -> usize {
        self.at
    }

    /// Whether every byte was read.
    #[must_use]
    pub fn is_at_end(&self) -> bool {
        self.at >= self.buf.len()
    }

    /// The next `len` bytes.
    ///
    /// # Errors
    /// [`Truncated`] when fewer remain.
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], Truncated> {
        let end = self
            .at
            .checked_add(len)
            .filter(|end| *end <= self.buf.len());
        let end = end.ok_or(Truncated {
            needed: self.at.saturating_add(len),
            available: self.buf.len(),
        })?;
        let slice = &self.buf[self.at..end];
        self.at = end;
        Ok(slice)
    }

    /// The next `N` bytes as an array.
    ///
    /// # Errors
    /// [`Truncated`] when fewer remain.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Truncated> {
        Ok(self.take(N)?.try_into().expect("take returned N bytes"))
    }

    /// One byte.
    ///
    /// # Errors
    /// [`Truncated`].
    pub fn u8(&mut self) -> Result<u8, Truncated> {
        Ok(self.array::<1>()?[0])
    }

    /// A big-endian `i16`.
    ///
    /// # Errors
    /// [`Truncated`].
    pub fn i16(&mut self) -> Result<i16, Truncated> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    /// A big-endian `i32`.
    ///
    /// # Errors
    /// [`Truncated`].
    pub fn i32(&mut self) -> Result<i32, Truncated> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// A big-endian `i64`.
    ///
    /// # Errors
    /// [`Truncated`].
    pub fn i64(&mut self) -> Result<i64, Truncated> {
        Ok(i64::from_be_bytes(self.array()?))
    }
}

/// CRC-32 (IEEE, as `java.util.zip.CRC32`) masked to 31 bits, as RocketMQ stores and
/// checks it (`UtilAll.crc32`): the CommitLog body CRC and the REGISTER_BROKER body CRC.
#[must_use]
pub fn java_crc32(bytes: &[u8]) -> i32 {
    i32::try_from(crc32fast::hash(bytes) & 0x7FFF_FFFF).expect("masked to 31 bits")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_and_stops_at_the_end() {
        let bytes = [0, 1, 0, 0, 0, 2, 9];
        let mut reader = ByteReader::new(&bytes, 0);
        assert_eq!(reader.i16(), Ok(1));
        assert_eq!(reader.i32(), Ok(2));
        assert_eq!(
            reader.i16(),
            Err(Truncated {
                needed: 8,
                available: 7
            })
        );
        assert_eq!(reader.position(), 6, "a failed read does not move");
        assert_eq!(reader.u8(), Ok(9));
        assert!(reader.is_at_end());
    }
}

//! Sparse files, both ways: a checkpoint finds a file's data ranges with
//! `SEEK_DATA`/`SEEK_HOLE` and archives only them as a GNU sparse entry
//! (type `S`: the map in the header and its extension blocks, the data
//! ranges' bytes as the body), so a 1 GiB file of holes costs neither a
//! gigabyte of reads nor of zeros in the archive; a restore writes only
//! the data ranges and sets the length, so the holes come back as holes.
//!
//! The map is peer data on the way back (anyone who can write the prefix
//! wrote it): [`Map::check`] refuses one whose ranges overlap, go
//! backwards, pass the file's end or do not add up to the body, and
//! [`MAX_SEGMENTS`] and [`MAX_REAL_SIZE`] bound it.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::archive::Counters;

/// Most data ranges of one sparse entry (a file with more is archived
/// whole, zeros included).
pub(crate) const MAX_SEGMENTS: usize = 65_536;
/// Largest apparent size of a sparse file (16 TiB, ext4's largest file).
pub(crate) const MAX_REAL_SIZE: u64 = 1 << 44;
/// The filesystem block a data range is counted in (ext4's and most
/// others' 4 KiB).
pub(crate) const BLOCK_BYTES: u64 = 4096;
/// Map entries in the GNU header itself and in each extension block.
const IN_HEADER: usize = 4;
const PER_EXTENSION: usize = 21;

/// A file's data ranges `(offset, length)`, in order, and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Map {
    pub segments: Vec<(u64, u64)>,
    pub real_size: u64,
}

impl Map {
    /// The bytes the ranges hold.
    pub(crate) fn data_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.1).sum()
    }

    /// What writing the ranges may allocate: each rounded up to whole
    /// blocks of [`BLOCK_BYTES`].
    pub(crate) fn disk_bytes(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| s.1.div_ceil(BLOCK_BYTES).saturating_mul(BLOCK_BYTES))
            .fold(0, u64::saturating_add)
    }

    /// Whether a map read from an archive is one a checkpoint could have
    /// written for a body of `stored` bytes.
    pub(crate) fn check(&self, stored: u64) -> bool {
        if self.segments.len() > MAX_SEGMENTS || self.real_size > MAX_REAL_SIZE {
            return false;
        }
        let mut end = 0u64;
        let mut sum = 0u64;
        for &(offset, len) in &self.segments {
            let Some(stop) = offset.checked_add(len) else {
                return false;
            };
            if offset < end || stop > self.real_size {
                return false;
            }
            end = stop;
            sum += len;
        }
        sum == stored
    }
}

/// The data ranges of `file` (of `size` bytes, `blocks` 512-byte blocks
/// allocated), or `None` when it has no hole worth keeping (or the
/// filesystem cannot say, or the map would be too long): then it is
/// archived whole.
pub(crate) fn data_map(file: &File, size: u64, blocks: u64) -> Option<Map> {
    use rustix::fs::SeekFrom;
    // Fully allocated: no hole to find (the common case costs no seek).
    if blocks.saturating_mul(512) >= size || size > MAX_REAL_SIZE {
        return None;
    }
    let mut segments = Vec::new();
    let mut at = 0u64;
    while at < size {
        let data = match rustix::fs::seek(file, SeekFrom::Data(at)) {
            Ok(d) => d,
            // No data past `at`: the rest is a hole.
            Err(rustix::io::Errno::NXIO) => break,
            Err(_) => return None,
        };
        if data >= size {
            break;
        }
        let hole = rustix::fs::seek(file, SeekFrom::Hole(data)).ok()?.min(size);
        if hole <= data {
            return None;
        }
        segments.push((data, hole - data));
        if segments.len() > MAX_SEGMENTS {
            return None;
        }
        at = hole;
    }
    let map = Map {
        segments,
        real_size: size,
    };
    (map.data_bytes() < size).then_some(map)
}

/// The extension blocks of `map` beyond the header's own four entries;
/// writes the first four and the real size into `header` (a GNU one).
pub(crate) fn encode(header: &mut tar::Header, map: &Map) -> Vec<u8> {
    let gnu = header.as_gnu_mut().expect("a GNU header");
    gnu.set_real_size(map.real_size);
    let (first, rest) = map.segments.split_at(map.segments.len().min(IN_HEADER));
    for (slot, &(offset, len)) in gnu.sparse.iter_mut().zip(first) {
        slot.set_offset(offset);
        slot.set_length(len);
    }
    gnu.set_is_extended(!rest.is_empty());
    let mut out = Vec::new();
    let chunks: Vec<&[(u64, u64)]> = rest.chunks(PER_EXTENSION).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let mut ext = tar::GnuExtSparseHeader::new();
        for (slot, &(offset, len)) in ext.sparse_mut().iter_mut().zip(chunk.iter()) {
            slot.set_offset(offset);
            slot.set_length(len);
        }
        ext.set_is_extended(i + 1 < chunks.len());
        out.extend_from_slice(ext.as_bytes());
    }
    out
}

/// Reads one map entry (24 bytes: offset, length); `None` for an empty
/// slot.
pub(crate) fn decode_entry(raw: &[u8]) -> io::Result<Option<(u64, u64)>> {
    let mut entry = tar::GnuSparseHeader {
        offset: [0; 12],
        numbytes: [0; 12],
    };
    entry.offset.copy_from_slice(&raw[..12]);
    entry.numbytes.copy_from_slice(&raw[12..24]);
    if entry.offset[0] == 0 && entry.numbytes[0] == 0 {
        return Ok(None);
    }
    Ok(Some((entry.offset()?, entry.length()?)))
}

/// Map entries in a GNU header block (bytes 386..482) and where its
/// `isextended` flag and real size are.
pub(crate) const HEADER_MAP: std::ops::Range<usize> = 386..482;
pub(crate) const HEADER_EXTENDED: usize = 482;
/// Map entries in an extension block and its `isextended` flag.
pub(crate) const EXT_MAP: std::ops::Range<usize> = 0..504;
pub(crate) const EXT_EXTENDED: usize = 504;

/// Reads a file's data ranges in order, as one stream (the body of its
/// sparse entry): zeros where the file shrank meanwhile.
pub(crate) struct DataReader {
    file: File,
    segments: std::vec::IntoIter<(u64, u64)>,
    current: (u64, u64),
    counters: Arc<Counters>,
}

impl DataReader {
    pub(crate) fn new(file: File, map: Map, counters: Arc<Counters>) -> Self {
        Self {
            file,
            segments: map.segments.into_iter(),
            current: (0, 0),
            counters,
        }
    }
}

impl Read for DataReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.1 == 0 {
            match self.segments.next() {
                Some(s) => self.current = s,
                None => return Ok(0),
            }
        }
        let (offset, left) = self.current;
        let want = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        let n = match self.file.read_at(&mut buf[..want], offset)? {
            0 => {
                buf[..want].fill(0);
                want
            }
            n => {
                self.counters
                    .bytes_read
                    .fetch_add(n as u64, Ordering::Relaxed);
                n
            }
        };
        self.current = (offset + n as u64, left - n as u64);
        Ok(n)
    }
}

/// Writes a sparse entry's body (`body`, the data ranges in order) into
/// the new, empty `file`: each range at its offset, then the length, so
/// what was a hole stays one. Returns the bytes written.
pub(crate) fn write_into(file: &File, map: &Map, body: &mut impl Read) -> io::Result<u64> {
    let mut written = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    for &(offset, len) in &map.segments {
        let mut left = len;
        let mut at = offset;
        while left > 0 {
            let want = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
            body.read_exact(&mut buf[..want])?;
            file.write_all_at(&buf[..want], at)?;
            at += want as u64;
            left -= want as u64;
        }
        written += len;
    }
    file.set_len(map.real_size)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skip_support;

    fn map(segments: &[(u64, u64)], real_size: u64) -> Map {
        Map {
            segments: segments.to_vec(),
            real_size,
        }
    }

    #[test]
    fn a_map_from_an_archive_is_checked() {
        assert!(map(&[(0, 10), (100, 5)], 200).check(15));
        assert!(map(&[], 1 << 30).check(0));
        // Not adding up to the body, overlapping, backwards, past the end.
        assert!(!map(&[(0, 10), (100, 5)], 200).check(16));
        assert!(!map(&[(0, 10), (5, 5)], 200).check(15));
        assert!(!map(&[(100, 5), (0, 10)], 200).check(15));
        assert!(!map(&[(190, 20)], 200).check(20));
        assert!(!map(&[(u64::MAX, 2)], u64::MAX).check(2));
        assert!(!map(&[], MAX_REAL_SIZE + 1).check(0));
        let many: Vec<(u64, u64)> = (0..=MAX_SEGMENTS as u64).map(|i| (i * 2, 1)).collect();
        assert!(!map(&many, 1 << 40).check(many.len() as u64));
        // One byte here and there allocates a block each.
        assert_eq!(
            map(&[(0, 1), (8192, 1), (16384, 4097)], 1 << 20).disk_bytes(),
            4 * 4096
        );
    }

    #[test]
    fn a_map_encodes_into_the_header_and_extension_blocks() {
        let segments: Vec<(u64, u64)> = (0..30).map(|i| (i * 4096, 512)).collect();
        let m = map(&segments, 10 << 30);
        let mut h = tar::Header::new_gnu();
        let ext = encode(&mut h, &m);
        assert_eq!(ext.len(), 2 * 512, "26 entries past the header: two blocks");
        let block = h.as_bytes();
        let mut got = Vec::new();
        for raw in block[HEADER_MAP].chunks(24) {
            got.extend(decode_entry(raw).unwrap());
        }
        assert_eq!(block[HEADER_EXTENDED], 1);
        for b in ext.chunks(512) {
            for raw in b[EXT_MAP].chunks(24) {
                got.extend(decode_entry(raw).unwrap());
            }
        }
        assert_eq!((ext[504], ext[512 + 504]), (1, 0));
        assert_eq!(got, segments);
        assert_eq!(h.as_gnu().unwrap().real_size().unwrap(), 10 << 30);
    }

    #[test]
    fn a_file_with_a_hole_maps_to_its_data_and_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let f = File::create(&path).unwrap();
        f.write_all_at(&[7u8; 8192], 1 << 20).unwrap();
        f.set_len(4 << 20).unwrap();
        let f = File::open(&path).unwrap();
        let md = f.metadata().unwrap();
        use std::os::unix::fs::MetadataExt as _;
        let Some(m) = data_map(&f, md.len(), md.blocks()) else {
            skip_support::skip("no SEEK_HOLE on the temp filesystem");
            return;
        };
        assert!(m.data_bytes() < 1 << 20, "{m:?}");
        assert_eq!(m.real_size, 4 << 20);
        let mut body = Vec::new();
        DataReader::new(f, m.clone(), Arc::default())
            .read_to_end(&mut body)
            .unwrap();
        let out = File::create(dir.path().join("t")).unwrap();
        assert_eq!(
            write_into(&out, &m, &mut &body[..]).unwrap(),
            m.data_bytes()
        );
        assert_eq!(
            std::fs::read(dir.path().join("t")).unwrap(),
            std::fs::read(&path).unwrap()
        );
    }
}

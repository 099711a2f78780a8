//! Reads a tar stream header by header with hard caps, for Restore: an
//! archive comes from a prefix that anyone holding write access to it
//! (on AWS, sandbox code with the execution role) may have replaced.
//!
//! `tar`'s own `entries()` reads a GNU long name, long link or pax header
//! whole into memory, however large its header says it is: one header
//! claiming gigabytes of zeros (a few MiB of gzip) would make the restoring
//! process allocate them. Here every such header is refused above
//! [`MAX_EXT_BYTES`] before a byte of it is read, every header block counts
//! towards [`Limits::max_entries`], and every entry's size towards
//! [`Limits::max_data`], so a stream is refused before it costs more than
//! those limits.

use std::io::{self, Read};

use super::sparse;

/// Largest GNU long name, long link, pax or GNU sparse extension accepted.
pub(crate) const MAX_EXT_BYTES: u64 = 64 * 1024;
/// Most header blocks (entries and their extension headers) accepted.
pub(crate) const MAX_ENTRIES: u64 = 500_000;

const BLOCK: usize = 512;

/// What a stream may cost.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Most header blocks.
    pub max_entries: u64,
    /// Most bytes of entry bodies (the files' sizes, summed).
    pub max_data: u64,
}

/// Why a stream was refused.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// An extension header larger than [`MAX_EXT_BYTES`].
    HeaderTooLong,
    /// More header blocks than [`Limits::max_entries`].
    TooManyEntries,
    /// More body bytes than [`Limits::max_data`].
    TooMuchData,
    /// Not a tar stream (a bad checksum, a field not understood), or one
    /// cut short; or reading it failed.
    Io(io::Error),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// One entry, with its extension headers applied.
#[derive(Debug)]
pub(crate) struct Entry {
    pub kind: tar::EntryType,
    pub path: Vec<u8>,
    pub link: Option<Vec<u8>>,
    pub mode: u32,
    pub mtime: Option<u64>,
    /// A GNU sparse entry's map (checked against its body's size).
    pub sparse: Option<sparse::Map>,
}

/// A tar stream, read one entry at a time.
pub(crate) struct Reader<R> {
    inner: R,
    limits: Limits,
    blocks: u64,
    data: u64,
    /// Body bytes of the current entry not yet read.
    body_left: u64,
    /// Padding after the current entry's body.
    pad_left: u64,
    ended: bool,
}

fn malformed(what: &'static str) -> ReadError {
    ReadError::Io(io::Error::new(io::ErrorKind::InvalidData, what))
}

fn padding(size: u64) -> u64 {
    (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64
}

impl<R: Read> Reader<R> {
    pub(crate) fn new(inner: R, limits: Limits) -> Self {
        Self {
            inner,
            limits,
            blocks: 0,
            data: 0,
            body_left: 0,
            pad_left: 0,
            ended: false,
        }
    }

    /// The stream after the end-of-archive block (the rest is to be
    /// drained by the caller).
    pub(crate) fn into_inner(self) -> R {
        self.inner
    }

    /// Reads and discards `n` bytes; the stream ending first is an error.
    fn skip(&mut self, n: u64) -> Result<(), ReadError> {
        let got = io::copy(&mut (&mut self.inner).take(n), &mut io::sink())?;
        if got != n {
            return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        Ok(())
    }

    /// The next header block, counted; `None` at the end-of-archive block.
    fn block(&mut self) -> Result<Option<[u8; BLOCK]>, ReadError> {
        let mut block = [0u8; BLOCK];
        self.inner.read_exact(&mut block)?;
        if block.iter().all(|b| *b == 0) {
            return Ok(None);
        }
        self.blocks += 1;
        if self.blocks > self.limits.max_entries {
            return Err(ReadError::TooManyEntries);
        }
        let header = tar::Header::from_byte_slice(&block);
        let stored = header.cksum().map_err(|_| malformed("checksum field"))?;
        let (start, end) = (148, 156);
        let sum: u32 = block[..start]
            .iter()
            .chain(&block[end..])
            .map(|b| u32::from(*b))
            .sum::<u32>()
            + 8 * u32::from(b' ');
        if sum != stored {
            return Err(malformed("header checksum"));
        }
        Ok(Some(block))
    }

    /// The body of an extension header of `size` bytes, capped.
    fn ext_body(&mut self, size: u64) -> Result<Vec<u8>, ReadError> {
        if size > MAX_EXT_BYTES {
            return Err(ReadError::HeaderTooLong);
        }
        let mut body = vec![0u8; usize::try_from(size).map_err(|_| ReadError::HeaderTooLong)?];
        self.inner.read_exact(&mut body)?;
        self.skip(padding(size))?;
        Ok(body)
    }

    /// The next entry, after skipping what is left of the current one's
    /// body; `None` at the end of the archive.
    pub(crate) fn next_entry(&mut self) -> Result<Option<Entry>, ReadError> {
        if self.ended {
            return Ok(None);
        }
        let left = self.body_left + self.pad_left;
        self.body_left = 0;
        self.pad_left = 0;
        self.skip(left)?;
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        let mut pax = Pax::default();
        loop {
            let Some(block) = self.block()? else {
                self.ended = true;
                return Ok(None);
            };
            let header = tar::Header::from_byte_slice(&block);
            let size = header.entry_size().map_err(|_| malformed("size field"))?;
            let kind = header.entry_type();
            match kind {
                tar::EntryType::GNULongName => long_name = Some(trim_nul(self.ext_body(size)?)),
                tar::EntryType::GNULongLink => long_link = Some(trim_nul(self.ext_body(size)?)),
                tar::EntryType::XHeader => pax = Pax::parse(&self.ext_body(size)?)?,
                // Global pax headers change nothing this reader uses.
                tar::EntryType::XGlobalHeader => drop(self.ext_body(size)?),
                _ => {
                    let size = pax.size.unwrap_or(size);
                    let sparse = if kind.is_gnu_sparse() {
                        let real_size = header
                            .as_gnu()
                            .and_then(|g| g.real_size().ok())
                            .ok_or_else(|| malformed("sparse size"))?;
                        let map = sparse::Map {
                            segments: self.sparse_map(&block)?,
                            real_size,
                        };
                        if !map.check(size) {
                            return Err(malformed("sparse map"));
                        }
                        Some(map)
                    } else {
                        None
                    };
                    // What the entry takes on disk: a sparse entry's every
                    // range at least a filesystem block, so a map of many
                    // one-byte ranges costs what it allocates.
                    let cost = sparse.as_ref().map_or(size, sparse::Map::disk_bytes);
                    self.data = self.data.saturating_add(cost);
                    if self.data > self.limits.max_data {
                        return Err(ReadError::TooMuchData);
                    }
                    self.body_left = size;
                    self.pad_left = padding(size);
                    return Ok(Some(Entry {
                        kind,
                        path: pax
                            .path
                            .or(long_name)
                            .unwrap_or_else(|| header.path_bytes().into_owned()),
                        link: pax
                            .linkpath
                            .or(long_link)
                            .or_else(|| header.link_name_bytes().map(|l| l.into_owned())),
                        mode: header.mode().unwrap_or(0o644),
                        mtime: pax.mtime.or_else(|| header.mtime().ok()),
                        sparse,
                    }));
                }
            }
        }
    }

    /// The map of a GNU sparse entry: the header's entries, then those of
    /// its extension blocks (each counted as a header block), at most
    /// [`sparse::MAX_SEGMENTS`] of them.
    fn sparse_map(&mut self, block: &[u8; BLOCK]) -> Result<Vec<(u64, u64)>, ReadError> {
        let mut segments = Vec::new();
        let take = |raw: &[u8], segments: &mut Vec<(u64, u64)>| -> Result<(), ReadError> {
            for entry in raw.chunks(24) {
                if let Some(s) = sparse::decode_entry(entry).map_err(|_| malformed("sparse map"))? {
                    segments.push(s);
                }
            }
            if segments.len() > sparse::MAX_SEGMENTS {
                return Err(malformed("sparse map"));
            }
            Ok(())
        };
        take(&block[sparse::HEADER_MAP], &mut segments)?;
        let mut more = block[sparse::HEADER_EXTENDED] == 1;
        while more {
            let mut ext = [0u8; BLOCK];
            self.inner.read_exact(&mut ext)?;
            self.blocks += 1;
            if self.blocks > self.limits.max_entries {
                return Err(ReadError::TooManyEntries);
            }
            take(&ext[sparse::EXT_MAP], &mut segments)?;
            more = ext[sparse::EXT_EXTENDED] == 1;
        }
        // GNU tar ends a map with an empty range at the file's end.
        segments.retain(|s| s.1 > 0);
        Ok(segments)
    }

    /// The current entry's body (at most its size).
    pub(crate) fn body(&mut self) -> Body<'_, R> {
        Body { reader: self }
    }
}

/// Reads the current entry's body.
pub(crate) struct Body<'a, R> {
    reader: &'a mut Reader<R>,
}

impl<R: Read> Read for Body<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let r = &mut *self.reader;
        if r.body_left == 0 {
            return Ok(0);
        }
        let want = usize::try_from(r.body_left)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = r.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        r.body_left -= n as u64;
        Ok(n)
    }
}

fn trim_nul(mut v: Vec<u8>) -> Vec<u8> {
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

/// What a pax header says that this reader uses.
#[derive(Debug, Default)]
struct Pax {
    path: Option<Vec<u8>>,
    linkpath: Option<Vec<u8>>,
    size: Option<u64>,
    mtime: Option<u64>,
}

impl Pax {
    /// Parses records `"<len> <key>=<value>\n"`.
    fn parse(mut body: &[u8]) -> Result<Self, ReadError> {
        let mut pax = Self::default();
        while !body.is_empty() && body != [0] {
            let space = body
                .iter()
                .position(|b| *b == b' ')
                .ok_or_else(|| malformed("pax record"))?;
            let len: usize = std::str::from_utf8(&body[..space])
                .ok()
                .and_then(|s| s.parse().ok())
                .filter(|l| *l > space + 1 && *l <= body.len())
                .ok_or_else(|| malformed("pax record length"))?;
            let record = &body[space + 1..len];
            body = &body[len..];
            let record = record.strip_suffix(b"\n").unwrap_or(record);
            let Some(eq) = record.iter().position(|b| *b == b'=') else {
                return Err(malformed("pax record"));
            };
            let (key, value) = (&record[..eq], &record[eq + 1..]);
            let number = || -> Result<u64, ReadError> {
                let text = std::str::from_utf8(value).map_err(|_| malformed("pax number"))?;
                // A time may have a fraction: the seconds are enough.
                let whole = text.split('.').next().unwrap_or("");
                whole.parse().map_err(|_| malformed("pax number"))
            };
            match key {
                b"path" => pax.path = Some(value.to_vec()),
                b"linkpath" => pax.linkpath = Some(value.to_vec()),
                b"size" => pax.size = Some(number()?),
                b"mtime" => pax.mtime = number().ok(),
                _ => {}
            }
        }
        Ok(pax)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOMY: Limits = Limits {
        max_entries: 100,
        max_data: 1 << 20,
    };

    fn header(name: &[u8], kind: tar::EntryType, size: u64) -> [u8; BLOCK] {
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_entry_type(kind);
        h.set_mode(0o640);
        h.set_size(size);
        h.set_mtime(1_700_000_000);
        h.set_cksum();
        *h.as_bytes()
    }

    fn with_body(out: &mut Vec<u8>, h: [u8; BLOCK], body: &[u8]) {
        out.extend_from_slice(&h);
        out.extend_from_slice(body);
        out.extend(std::iter::repeat_n(
            0u8,
            padding(body.len() as u64) as usize,
        ));
    }

    /// Each entry's path and body.
    type Listing = Vec<(Vec<u8>, Vec<u8>)>;

    fn names(data: &[u8], limits: Limits) -> Result<Listing, ReadError> {
        let mut r = Reader::new(data, limits);
        let mut out = Vec::new();
        while let Some(e) = r.next_entry()? {
            let mut body = Vec::new();
            r.body().read_to_end(&mut body)?;
            out.push((e.path, body));
        }
        Ok(out)
    }

    #[test]
    fn what_tar_builder_writes_reads_back_with_long_names_and_links() {
        let long = "d/".repeat(200) + "file";
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(5);
        h.set_mode(0o600);
        b.append_data(&mut h, &long, &b"hello"[..]).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "l", "t/".repeat(100)).unwrap();
        let data = b.into_inner().unwrap();
        let mut r = Reader::new(&data[..], ROOMY);
        let e = r.next_entry().unwrap().unwrap();
        assert_eq!((e.path, e.mode), (long.into_bytes(), 0o600));
        // The body is skipped when not read.
        let e = r.next_entry().unwrap().unwrap();
        assert_eq!(e.kind, tar::EntryType::Symlink);
        assert_eq!(e.link.unwrap(), "t/".repeat(100).into_bytes());
        assert!(r.next_entry().unwrap().is_none());
    }

    #[test]
    fn pax_headers_name_and_size_entries() {
        let mut data = Vec::new();
        let rec = |k: &str, v: &str| {
            let body = format!(" {k}={v}\n");
            let mut len = body.len() + 1;
            while len != body.len() + len.to_string().len() {
                len = body.len() + len.to_string().len();
            }
            format!("{len}{body}")
        };
        let pax = rec("path", "from/pax") + &rec("mtime", "12.5");
        with_body(
            &mut data,
            header(b"pax", tar::EntryType::XHeader, pax.len() as u64),
            pax.as_bytes(),
        );
        with_body(
            &mut data,
            header(b"short", tar::EntryType::Regular, 2),
            b"ok",
        );
        data.extend([0u8; 1024]);
        let mut r = Reader::new(&data[..], ROOMY);
        let e = r.next_entry().unwrap().unwrap();
        assert_eq!((e.path.as_slice(), e.mtime), (&b"from/pax"[..], Some(12)));
    }

    #[test]
    fn an_oversized_extension_header_is_refused_before_it_is_read() {
        for kind in [
            tar::EntryType::GNULongName,
            tar::EntryType::GNULongLink,
            tar::EntryType::XHeader,
            tar::EntryType::XGlobalHeader,
        ] {
            // The header claims 8 GiB; no body follows at all.
            let data = header(b"x", kind, 8 << 30);
            let err = names(&data, ROOMY).unwrap_err();
            assert!(matches!(err, ReadError::HeaderTooLong), "{kind:?}: {err:?}");
        }
        let mut data = Vec::new();
        let name = vec![b'n'; MAX_EXT_BYTES as usize];
        with_body(
            &mut data,
            header(b"L", tar::EntryType::GNULongName, name.len() as u64),
            &name,
        );
        with_body(&mut data, header(b"s", tar::EntryType::Regular, 0), b"");
        data.extend([0u8; 1024]);
        assert_eq!(
            names(&data, ROOMY).unwrap()[0].0,
            name,
            "the cap itself passes"
        );
    }

    #[test]
    fn entries_and_data_are_capped() {
        let mut data = Vec::new();
        for _ in 0..5 {
            with_body(&mut data, header(b"e", tar::EntryType::Regular, 3), b"abc");
        }
        data.extend([0u8; 1024]);
        assert_eq!(names(&data, ROOMY).unwrap().len(), 5);
        let few = Limits {
            max_entries: 4,
            ..ROOMY
        };
        assert!(matches!(names(&data, few), Err(ReadError::TooManyEntries)));
        let small = Limits {
            max_data: 14,
            ..ROOMY
        };
        assert!(matches!(names(&data, small), Err(ReadError::TooMuchData)));
    }

    #[test]
    fn a_cut_or_corrupt_stream_is_an_error() {
        let mut data = Vec::new();
        with_body(
            &mut data,
            header(b"f", tar::EntryType::Regular, 600),
            &[7; 600],
        );
        assert!(matches!(names(&data[..700], ROOMY), Err(ReadError::Io(_))));
        let mut bad = data.clone();
        bad[0] = b'g';
        assert!(matches!(names(&bad, ROOMY), Err(ReadError::Io(_))));
        // No end-of-archive block: cut short.
        assert!(matches!(names(&data, ROOMY), Err(ReadError::Io(_))));
    }

    /// A sparse map is peer data: one that overlaps or does not add up to
    /// its body is refused before its body is read.
    #[test]
    fn a_sparse_map_that_lies_is_refused() {
        let entry = |segments: &[(u64, u64)], stored: u64| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::GNUSparse);
            h.set_size(stored);
            h.set_mode(0o644);
            let map = sparse::Map {
                segments: segments.to_vec(),
                real_size: 1 << 30,
            };
            let ext = sparse::encode(&mut h, &map);
            h.as_old_mut().name[..1].copy_from_slice(b"s");
            h.set_cksum();
            let mut data = h.as_bytes().to_vec();
            data.extend(ext);
            data.extend(vec![7u8; stored as usize]);
            data.extend(vec![0u8; padding(stored) as usize + 1024]);
            data
        };
        let many: Vec<(u64, u64)> = (0..10).map(|i| (i * 4096, 10)).collect();
        let got = names(&entry(&many, 100), ROOMY).unwrap();
        assert_eq!(got[0].1, vec![7u8; 100]);
        // Ten one-block ranges of 10 bytes count as the ten blocks they
        // allocate, not the 100 bytes they hold.
        let tight = Limits {
            max_data: 10 * 4096 - 1,
            ..ROOMY
        };
        assert!(matches!(
            names(&entry(&many, 100), tight),
            Err(ReadError::TooMuchData)
        ));
        for (segments, stored) in [
            (vec![(0, 10), (5, 10)], 20),
            (vec![(0, 10)], 11),
            (vec![(1 << 30, 10)], 10),
        ] {
            let err = names(&entry(&segments, stored), ROOMY).unwrap_err();
            assert!(matches!(err, ReadError::Io(_)), "{segments:?}: {err:?}");
        }
    }
}

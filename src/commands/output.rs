//! A command's output as `run` and `wait` return it: the bytes kept (the
//! last [`MAX_OUTPUT_BYTES`] of the input, counted in input bytes, so 16
//! MiB of invalid bytes holds 16 MiB, not the 48 MiB of their U+FFFD) and
//! decoded as UTF-8 once, at the end, in one pass. The callbacks see text
//! as it arrives through their own [`Utf8Decoder`], which carries a
//! character split across chunks and never scans a byte twice.

use std::collections::VecDeque;

/// Output kept per stream, in bytes of the input; the tail is kept beyond
/// it.
pub(crate) const MAX_OUTPUT_BYTES: usize = 64 * 1024 * 1024;

/// What an invalid sequence becomes.
const REPLACEMENT: &str = "\u{fffd}";

/// Decodes a byte stream as UTF-8 chunk by chunk: invalid sequences become
/// U+FFFD (one per maximal invalid sequence, as `String::from_utf8_lossy`),
/// a character split across chunks is rebuilt from the (at most 3) bytes
/// carried over.
#[derive(Debug, Default)]
pub(crate) struct Utf8Decoder {
    carry: Vec<u8>,
}

impl Utf8Decoder {
    /// Decodes `bytes` onto `out`, in one pass: `utf8_chunks` walks the
    /// valid text, and a run of bytes that are invalid whatever follows
    /// them (0x80-0xC1, 0xF5-0xFF: 16 MiB of 0xff, say) is replaced in
    /// bulk, the walk going on after it.
    pub(crate) fn decode_into(&mut self, bytes: &[u8], out: &mut String) {
        let mut rest = if self.carry.is_empty() {
            bytes
        } else {
            self.complete_carry(bytes, out)
        };
        'walk: while !rest.is_empty() {
            let mut done = 0;
            for chunk in rest.utf8_chunks() {
                out.push_str(chunk.valid());
                let invalid = chunk.invalid();
                done += chunk.valid().len() + invalid.len();
                if invalid.is_empty() {
                    continue;
                }
                // The last sequence may be a character cut by the chunk's end.
                if done == rest.len() && is_incomplete(invalid) {
                    self.carry.extend_from_slice(invalid);
                    break 'walk;
                }
                out.push_str(REPLACEMENT);
                let mut run = done;
                while run < rest.len() && alone_invalid(rest[run]) {
                    run += 1;
                }
                if run > done {
                    out.push_str(&REPLACEMENT.repeat(run - done));
                    rest = &rest[run..];
                    continue 'walk;
                }
            }
            break;
        }
    }

    /// Decodes `bytes` into a new string.
    pub(crate) fn decode(&mut self, bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len());
        self.decode_into(bytes, &mut out);
        out
    }

    /// Ends the stream: a character left incomplete becomes U+FFFD.
    pub(crate) fn finish_into(&mut self, out: &mut String) {
        if !std::mem::take(&mut self.carry).is_empty() {
            out.push_str(REPLACEMENT);
        }
    }

    /// Completes the carried character with the first bytes of `bytes`
    /// (or finds it invalid); returns the rest of `bytes`.
    fn complete_carry<'b>(&mut self, bytes: &'b [u8], out: &mut String) -> &'b [u8] {
        let had = self.carry.len();
        let take = bytes.len().min(4 - had);
        self.carry.extend_from_slice(&bytes[..take]);
        let used = match std::str::from_utf8(&self.carry) {
            // Not possible for a carried prefix plus at most one
            // character's worth, but decoded all the same.
            Ok(text) => {
                out.push_str(text);
                self.carry.len()
            }
            Err(e) if e.valid_up_to() > 0 => {
                let text = std::str::from_utf8(&self.carry[..e.valid_up_to()]).unwrap_or_default();
                out.push_str(text);
                e.valid_up_to()
            }
            Err(e) => match e.error_len() {
                Some(bad) => {
                    out.push_str(REPLACEMENT);
                    bad
                }
                // Still incomplete: `bytes` ran out.
                None => return &[],
            },
        };
        self.carry.clear();
        // The carried bytes always belong to what was used.
        &bytes[used.saturating_sub(had).min(take)..]
    }
}

/// Whether `byte` is an invalid sequence by itself, whatever follows it:
/// a continuation byte where a character starts, or a byte no character
/// starts with.
fn alone_invalid(byte: u8) -> bool {
    (0x80..0xc2).contains(&byte) || byte >= 0xf5
}

/// Whether `seq` (an invalid sequence `utf8_chunks` reported last) is the
/// start of a valid character cut short rather than an invalid one.
fn is_incomplete(seq: &[u8]) -> bool {
    matches!(std::str::from_utf8(seq), Err(e) if e.valid_up_to() == 0 && e.error_len().is_none())
}

/// The last [`MAX_OUTPUT_BYTES`] bytes of a stream (or the caller's
/// `max_output_bytes`), as they arrived: a command's bytes, decoded once by
/// [`OutputBuffer::finish`], or a code cell's text chunks
/// (`OutputBuffer<String>`, taken back by [`OutputBuffer::into_chunks`]).
/// Linear in the output: chunks are kept as they came and the oldest are
/// dropped whole (only the one the limit falls in is cut).
#[derive(Debug)]
pub(crate) struct OutputBuffer<C = Vec<u8>> {
    /// The kept chunks, oldest first, and their count of bytes.
    chunks: VecDeque<C>,
    kept: usize,
    truncated: bool,
    /// The most bytes kept (`max_output_bytes` of the options).
    limit: usize,
}

/// What an [`OutputBuffer`] keeps: bytes, or text, which is only cut at a
/// character boundary.
pub(crate) trait Chunk {
    /// Its size in bytes.
    fn size(&self) -> usize;
    /// Drops at least `bytes` bytes from its front (fewer than its size);
    /// returns how many were dropped.
    fn drop_front(&mut self, bytes: usize) -> usize;
}

impl Chunk for Vec<u8> {
    fn size(&self) -> usize {
        self.len()
    }
    fn drop_front(&mut self, bytes: usize) -> usize {
        self.drain(..bytes);
        bytes
    }
}

impl Chunk for String {
    fn size(&self) -> usize {
        self.len()
    }
    /// Up to the next character boundary: the character the limit falls in
    /// goes whole.
    fn drop_front(&mut self, bytes: usize) -> usize {
        let mut cut = bytes.min(self.len());
        while !self.is_char_boundary(cut) {
            cut += 1;
        }
        self.drain(..cut);
        cut
    }
}

impl<C: Chunk> Default for OutputBuffer<C> {
    fn default() -> Self {
        Self::with_limit(MAX_OUTPUT_BYTES)
    }
}

impl<C: Chunk> OutputBuffer<C> {
    /// A buffer keeping the last `limit` bytes (0: none).
    pub(crate) fn with_limit(limit: usize) -> Self {
        Self {
            chunks: VecDeque::new(),
            kept: 0,
            truncated: false,
            limit,
        }
    }

    /// Keeps a chunk, dropping the oldest bytes past the limit (an empty
    /// chunk is not kept).
    pub(crate) fn push_chunk(&mut self, chunk: C) {
        if chunk.size() == 0 {
            return;
        }
        self.kept += chunk.size();
        self.chunks.push_back(chunk);
        while self.kept > self.limit {
            let Some(oldest) = self.chunks.front_mut() else {
                break;
            };
            let excess = self.kept - self.limit;
            self.truncated = true;
            if oldest.size() <= excess {
                self.kept -= oldest.size();
                self.chunks.pop_front();
            } else {
                self.kept -= oldest.drop_front(excess);
            }
        }
    }

    /// The kept chunks, oldest first, and whether older output was dropped.
    pub(crate) fn into_chunks(self) -> (VecDeque<C>, bool) {
        (self.chunks, self.truncated)
    }
}

impl OutputBuffer {
    /// Keeps a chunk of bytes, dropping the oldest bytes past the limit.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.push_chunk(bytes.to_vec());
    }

    /// The text (decoded in one pass; a dangling partial character is
    /// U+FFFD) and whether older output was dropped. After a cut, the
    /// continuation bytes of a character whose start was dropped are
    /// skipped rather than shown as U+FFFD.
    pub(crate) fn finish(self) -> (String, bool) {
        let mut text = String::with_capacity(self.kept);
        let mut decoder = Utf8Decoder::default();
        for (i, chunk) in self.chunks.iter().enumerate() {
            let mut bytes = chunk.as_slice();
            if i == 0 && self.truncated {
                let cut = bytes
                    .iter()
                    .take(3)
                    .take_while(|b| (0x80..0xc0).contains(*b))
                    .count();
                bytes = &bytes[cut..];
            }
            decoder.decode_into(bytes, &mut text);
        }
        decoder.finish_into(&mut text);
        (text, self.truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_OUTPUT_BYTES, OutputBuffer, Utf8Decoder};

    /// Text chunks (a code cell's logs) keep their newest bytes, cut only
    /// at a character boundary; 0 keeps nothing.
    #[test]
    fn text_chunks_keep_their_newest_bytes() {
        let mut buf = OutputBuffer::<String>::with_limit(5);
        buf.push_chunk("ab".to_owned());
        buf.push_chunk("cé".to_owned());
        buf.push_chunk(String::new());
        buf.push_chunk("fg".to_owned());
        let (chunks, truncated) = buf.into_chunks();
        // 7 bytes ("é" is 2) past a limit of 5: the oldest chunk goes whole.
        assert!(truncated);
        assert_eq!(Vec::from(chunks), ["cé", "fg"]);
        // 6 bytes past a limit of 3: the cut falls inside "€".
        let mut buf = OutputBuffer::<String>::with_limit(3);
        buf.push_chunk("é€x".to_owned());
        let (chunks, truncated) = buf.into_chunks();
        assert!(truncated);
        assert_eq!(Vec::from(chunks), ["x"], "the cut character goes whole");
        let mut buf = OutputBuffer::<String>::with_limit(0);
        buf.push_chunk("a".to_owned());
        assert_eq!(buf.into_chunks(), (Default::default(), true));
    }

    fn whole(buf: OutputBuffer) -> String {
        buf.finish().0
    }

    #[test]
    fn split_characters_are_rebuilt() {
        let mut d = Utf8Decoder::default();
        let bytes = "é€😀".as_bytes();
        assert_eq!(d.decode(&bytes[..1]), "");
        assert_eq!(d.decode(&bytes[1..3]), "é");
        assert_eq!(d.decode(&bytes[3..4]), "");
        assert_eq!(d.decode(&bytes[4..6]), "€");
        assert_eq!(d.decode(&bytes[6..7]), "");
        assert_eq!(d.decode(&bytes[7..8]), "");
        assert_eq!(d.decode(&bytes[8..]), "😀");
        let mut buf = OutputBuffer::default();
        for b in bytes {
            buf.push(&[*b]);
        }
        assert_eq!(buf.finish(), ("é€😀".to_owned(), false));
    }

    /// Whatever the chunking, the text is `String::from_utf8_lossy` of
    /// the whole stream.
    #[test]
    fn any_chunking_decodes_as_the_whole_stream() {
        let samples: [&[u8]; 8] = [
            b"\xff\xff\x80\xc0abc\xff\xe2\x82",
            b"\xfe\xc3\xa9\xf5\xf0\x9f\x98\x80\xbf",
            b"a\xffb\xe2\x82\xacc",
            b"\xe2\x82\x41\xf0\x9f\x98",
            b"\xf0\x9f\x98\x80\xed\xa0\x80z",
            b"\xc3\xc3\xa9\x80\x80",
            b"\xe2",
            b"\xf4\x90\x80\x80\xef\xbf\xbd",
        ];
        for sample in samples {
            let expected = String::from_utf8_lossy(sample).into_owned();
            for size in 1..=sample.len() {
                let mut d = Utf8Decoder::default();
                let mut out = String::new();
                for chunk in sample.chunks(size) {
                    d.decode_into(chunk, &mut out);
                }
                d.finish_into(&mut out);
                assert_eq!(out, expected, "{sample:?} in chunks of {size}");
                let mut buf = OutputBuffer::default();
                for chunk in sample.chunks(size) {
                    buf.push(chunk);
                }
                assert_eq!(whole(buf), expected, "{sample:?} kept in chunks of {size}");
            }
        }
    }

    /// One 1 MiB chunk of invalid bytes: linear (the old decoder drained
    /// one byte per loop, about a minute for this chunk).
    #[test]
    fn a_chunk_of_invalid_bytes_decodes_in_linear_time() {
        let started = std::time::Instant::now();
        let text = Utf8Decoder::default().decode(&vec![0xff; 1 << 20]);
        assert_eq!(text.chars().count(), 1 << 20);
        assert!(text.chars().all(|c| c == '\u{fffd}'));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }

    /// Past 64 MiB the oldest bytes go and the newest stay.
    #[test]
    fn the_kept_text_is_the_tail_past_the_budget() {
        let mut buf = OutputBuffer::default();
        let mib = vec![b'a'; 1 << 20];
        for _ in 0..70 {
            buf.push(&mib);
        }
        buf.push("é-the end".as_bytes());
        let (text, truncated) = buf.finish();
        assert!(truncated);
        assert_eq!(text.len(), MAX_OUTPUT_BYTES);
        assert!(text.ends_with("é-the end"));
    }

    /// What is kept is bounded in bytes of the input: 80 MiB of invalid
    /// bytes keep 64 MiB (each then one U+FFFD), never 64 MiB of their
    /// three-byte replacements; a character cut by the limit is dropped
    /// whole.
    #[test]
    fn the_bound_is_in_bytes_of_the_input() {
        let mut buf = OutputBuffer::default();
        let mib = vec![0xff; 1 << 20];
        for _ in 0..80 {
            buf.push(&mib);
            assert!(buf.kept <= MAX_OUTPUT_BYTES);
            let held: usize = buf.chunks.iter().map(Vec::capacity).sum();
            assert!(held <= MAX_OUTPUT_BYTES + (1 << 20), "{held}");
        }
        let (text, truncated) = buf.finish();
        assert!(truncated);
        assert_eq!(text.len(), 3 * MAX_OUTPUT_BYTES);
        // "€" is 3 bytes: pushed so that the limit cuts it after its first
        // byte, its two continuation bytes are not shown.
        let mut buf = OutputBuffer::default();
        buf.push("€".as_bytes());
        buf.push(&vec![b'a'; MAX_OUTPUT_BYTES - 2]);
        let (text, truncated) = buf.finish();
        assert!(truncated);
        assert_eq!(text.len(), MAX_OUTPUT_BYTES - 2);
        assert!(text.bytes().all(|b| b == b'a'));
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut d = Utf8Decoder::default();
        assert_eq!(d.decode(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(d.decode(b"\xe2\x82"), "");
        let mut out = String::new();
        d.finish_into(&mut out);
        assert_eq!(out, "\u{fffd}");
        let mut buf = OutputBuffer::default();
        buf.push(b"a\xffb");
        buf.push(b"\xe2\x82");
        assert_eq!(buf.finish(), ("a\u{fffd}b\u{fffd}".to_owned(), false));
    }
}

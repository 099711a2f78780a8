//! The per-process output ring: the last 1 MiB of output, each chunk with the
//! process's monotone sequence number, so that a subscriber can replay from
//! any retained `seq`.

use std::collections::VecDeque;

use bytes::Bytes;

/// Bytes of output kept per process.
pub(crate) const RING_BYTES: usize = 1 << 20;

/// Which stream a chunk came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Channel {
    Stdout,
    Stderr,
}

/// One chunk of output.
#[derive(Clone, Debug)]
pub(crate) struct Chunk {
    pub seq: u64,
    /// Bytes pushed before this chunk (over the whole life of the ring).
    pub offset: u64,
    pub channel: Channel,
    pub data: Bytes,
}

/// The asked-for output was already dropped from the ring.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Discarded;

/// A bounded log of output chunks. Sequence numbers start at 1.
#[derive(Debug)]
pub(crate) struct OutputRing {
    chunks: VecDeque<Chunk>,
    bytes: usize,
    capacity: usize,
    next_seq: u64,
    pushed: u64,
}

impl OutputRing {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            chunks: VecDeque::new(),
            bytes: 0,
            capacity,
            next_seq: 1,
            pushed: 0,
        }
    }

    /// Appends a chunk and returns its seq; drops the oldest chunks beyond
    /// the capacity (the newest chunk is always kept, even if larger).
    pub(crate) fn push(&mut self, channel: Channel, data: Bytes) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let offset = self.pushed;
        self.pushed += data.len() as u64;
        self.bytes += data.len();
        self.chunks.push_back(Chunk {
            seq,
            offset,
            channel,
            data,
        });
        while self.bytes > self.capacity && self.chunks.len() > 1 {
            if let Some(old) = self.chunks.pop_front() {
                self.bytes -= old.data.len();
            }
        }
        seq
    }

    /// The seq the next chunk will get.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The ring's capacity in bytes.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes retained from `seq` on (0 when `seq` is not retained or is new).
    pub(crate) fn bytes_since(&self, seq: u64) -> u64 {
        let first = self.chunks.front().map(|c| c.seq).unwrap_or(self.next_seq);
        if seq < first {
            return 0;
        }
        match self.chunks.get((seq - first) as usize) {
            Some(c) => self.pushed - c.offset,
            None => 0,
        }
    }

    /// Every retained chunk with `seq >= from`, or [`Discarded`] when some
    /// of them were already dropped.
    pub(crate) fn since(&self, from: u64) -> Result<Vec<Chunk>, Discarded> {
        let first = self.chunks.front().map(|c| c.seq).unwrap_or(self.next_seq);
        if from < first {
            return Err(Discarded);
        }
        Ok(self
            .chunks
            .iter()
            .skip((from - first) as usize)
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_from_any_retained_seq() {
        let mut r = OutputRing::new(10);
        assert_eq!(r.push(Channel::Stdout, Bytes::from_static(b"abcd")), 1);
        assert_eq!(r.push(Channel::Stderr, Bytes::from_static(b"efgh")), 2);
        let all = r.since(1).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].channel, Channel::Stderr);
        assert_eq!(r.since(2).unwrap().len(), 1);
        assert!(r.since(3).unwrap().is_empty());
        assert!(r.since(9).unwrap().is_empty());
        assert_eq!(r.bytes_since(1), 8);
        assert_eq!(r.bytes_since(2), 4);
        assert_eq!(r.bytes_since(3), 0);
    }

    #[test]
    fn drops_oldest_beyond_capacity() {
        let mut r = OutputRing::new(10);
        r.push(Channel::Stdout, Bytes::from_static(b"abcd"));
        r.push(Channel::Stdout, Bytes::from_static(b"efgh"));
        r.push(Channel::Stdout, Bytes::from_static(b"ijkl"));
        assert_eq!(r.since(1).unwrap_err(), Discarded);
        assert_eq!(r.since(2).unwrap().len(), 2);
        // A single oversized chunk is still kept.
        r.push(Channel::Stdout, Bytes::from(vec![0u8; 50]));
        assert_eq!(r.since(4).unwrap().len(), 1);
        assert_eq!(r.since(3).unwrap_err(), Discarded);
    }
}

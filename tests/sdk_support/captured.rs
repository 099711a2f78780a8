//! A `tracing` writer that keeps every byte, for the canary tests that
//! search a whole TRACE log for what must never be in it.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// Everything written, shared by the clones the subscriber makes.
#[derive(Clone, Default)]
pub struct Captured(pub Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Installs the process-wide subscriber that writes every event and
    /// span of every target at TRACE here (one per test binary), and
    /// returns it.
    ///
    /// # Panics
    /// When the binary already has a global subscriber.
    pub fn install_global_trace() -> Captured {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_target(true)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        captured
    }

    /// What was written so far, as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

//! The build's log in BuildKit's plain progress shape, line by line as the
//! build goes: `#<vertex> [<k>/<n>] <instruction>`, the step's output as
//! `#<vertex> <seconds> <line>`, `#<vertex> DONE <seconds>s`, and for a
//! failed `RUN` BuildKit's error block, whose lines the SDK reads (step,
//! command, exit code; see `rayito::template::parse_build_log`).
//!
//! BuildKit's blank lines between vertices are left out: a log event is
//! never empty (CloudWatch refuses empty messages), and the SDK keeps only
//! the last 20 lines of a failed build.
//!
//! Output is peer data: each line is cut at [`MAX_LINE_BYTES`], and after
//! [`MAX_OUTPUT_LINES`] lines of output in one build the rest is dropped
//! with one notice.

use std::collections::VecDeque;
use std::time::Instant;

use tokio::sync::mpsc::UnboundedSender;

/// The longest output line kept (longer ones are cut).
pub(crate) const MAX_LINE_BYTES: usize = 4096;
/// The most output lines one build logs.
pub(crate) const MAX_OUTPUT_LINES: usize = 10_000;
/// How many of a failed step's last output lines its error block repeats.
const ERROR_CONTEXT_LINES: usize = 10;

/// The build's log.
#[derive(Debug)]
pub(crate) struct BuildLog {
    tx: UnboundedSender<String>,
    /// The last vertex number given out.
    vertex: u32,
    output_lines: usize,
    clipped: bool,
}

/// One vertex (step) of the log, while it runs.
#[derive(Debug)]
pub(crate) struct Vertex {
    number: u32,
    /// `[k/n] RUN ...`: how BuildKit names the step.
    name: String,
    started: Instant,
    /// The last output lines, with their times, for the error block.
    recent: VecDeque<String>,
}

impl BuildLog {
    pub(crate) fn new(tx: UnboundedSender<String>) -> Self {
        Self {
            tx,
            vertex: 0,
            output_lines: 0,
            clipped: false,
        }
    }

    fn line(&self, line: String) {
        // The receiver gone (the version deleted) stops nothing: the
        // build's outcome is still reported.
        let _ = self.tx.send(line);
    }

    /// The opening vertex: the Dockerfile is read.
    pub(crate) fn definition(&mut self, dockerfile_bytes: usize) {
        let v = self.begin("[internal] load build definition from Dockerfile".to_owned());
        self.line(format!(
            "#{} transferring dockerfile: {dockerfile_bytes}B done",
            v.number
        ));
        self.done(v);
    }

    /// Starts a vertex named `name` (`[k/n] RUN ...`, `exporting to image`).
    pub(crate) fn begin(&mut self, name: String) -> Vertex {
        self.vertex += 1;
        self.line(format!("#{} {name}", self.vertex));
        Vertex {
            number: self.vertex,
            name,
            started: Instant::now(),
            recent: VecDeque::new(),
        }
    }

    /// Ends a vertex the base image stands for.
    pub(crate) fn cached(&mut self, v: Vertex) {
        self.line(format!("#{} CACHED", v.number));
    }

    /// Ends a vertex that succeeded.
    pub(crate) fn done(&mut self, v: Vertex) {
        self.line(format!(
            "#{} DONE {:.1}s",
            v.number,
            v.started.elapsed().as_secs_f64()
        ));
    }

    /// A line the step printed (bytes, cut and made UTF-8).
    pub(crate) fn output(&mut self, v: &mut Vertex, bytes: &[u8]) {
        if self.output_lines >= MAX_OUTPUT_LINES {
            if !self.clipped {
                self.clipped = true;
                self.line(format!(
                    "#{} [output clipped, log limit {MAX_OUTPUT_LINES} lines reached]",
                    v.number
                ));
            }
            return;
        }
        self.output_lines += 1;
        let cut = &bytes[..bytes.len().min(MAX_LINE_BYTES)];
        let text = String::from_utf8_lossy(cut);
        let text = text.trim_end_matches(['\r', '\n']);
        let timed = format!("{:.3} {text}", v.started.elapsed().as_secs_f64());
        self.line(format!("#{} {timed}", v.number));
        if v.recent.len() == ERROR_CONTEXT_LINES {
            v.recent.pop_front();
        }
        v.recent.push_back(timed);
    }

    /// Ends a vertex that failed with `error` (`process "/bin/sh -c exit
    /// 3" did not complete successfully: exit code: 3`), then the summary
    /// BuildKit prints when the build stops there.
    pub(crate) fn failed(&mut self, v: Vertex, error: &str) {
        self.line(format!("#{} ERROR: {error}", v.number));
        self.line("------".to_owned());
        self.line(format!(" > {}:", v.name));
        for line in &v.recent {
            self.line(line.clone());
        }
        self.line("------".to_owned());
        self.line(format!("ERROR: failed to solve: {error}"));
    }

    /// A failure before any step (the Dockerfile cannot be read or built).
    pub(crate) fn fatal(&mut self, error: &str) {
        self.line(format!("ERROR: failed to solve: {error}"));
    }

    /// The closing vertex of a successful build.
    pub(crate) fn exported(&mut self, digest: &str) {
        let v = self.begin("exporting to image".to_owned());
        self.line(format!("#{} exporting layers done", v.number));
        self.line(format!("#{} writing image sha256:{digest} done", v.number));
        self.done(v);
    }
}

/// BuildKit's words for a `RUN` that did not exit 0: the process as
/// `argv` joined by spaces, and its exit code (128 + the signal for a
/// killed one).
pub(crate) fn process_error(argv: &[String], exit_code: i32) -> String {
    format!(
        "process \"{}\" did not complete successfully: exit code: {exit_code}",
        argv.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(line) = rx.try_recv() {
            out.push(line);
        }
        out
    }

    /// The seconds of a timed line replaced by `T`, for comparison.
    fn untimed(line: &str) -> String {
        let mut words: Vec<String> = line.split(' ').map(str::to_owned).collect();
        for w in &mut words {
            if w.contains('.') && w.trim_end_matches('s').parse::<f64>().is_ok() {
                *w = "T".to_owned();
            }
        }
        words.join(" ")
    }

    #[test]
    fn a_failed_run_reads_as_buildkit_writes_it() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut log = BuildLog::new(tx);
        log.definition(120);
        let from = log.begin("[1/3] FROM public.ecr.aws/amazonlinux/amazonlinux:2023".to_owned());
        log.cached(from);
        let mut run = log.begin("[2/3] RUN echo hi; exit 3".to_owned());
        log.output(&mut run, b"hi\n");
        let argv = [
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            "echo hi; exit 3".to_owned(),
        ];
        log.failed(run, &process_error(&argv, 3));
        let lines: Vec<String> = drain(&mut rx).iter().map(|l| untimed(l)).collect();
        assert_eq!(
            lines,
            [
                "#1 [internal] load build definition from Dockerfile",
                "#1 transferring dockerfile: 120B done",
                "#1 DONE T",
                "#2 [1/3] FROM public.ecr.aws/amazonlinux/amazonlinux:2023",
                "#2 CACHED",
                "#3 [2/3] RUN echo hi; exit 3",
                "#3 T hi",
                "#3 ERROR: process \"/bin/sh -c echo hi; exit 3\" did not complete successfully: exit code: 3",
                "------",
                " > [2/3] RUN echo hi; exit 3:",
                "T hi",
                "------",
                "ERROR: failed to solve: process \"/bin/sh -c echo hi; exit 3\" did not complete successfully: exit code: 3",
            ]
        );
    }

    #[test]
    fn output_is_bounded() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut log = BuildLog::new(tx);
        let mut v = log.begin("[1/1] RUN yes".to_owned());
        let long = vec![b'y'; MAX_LINE_BYTES * 3];
        log.output(&mut v, &long);
        for _ in 0..MAX_OUTPUT_LINES + 5 {
            log.output(&mut v, b"y");
        }
        let lines = drain(&mut rx);
        assert_eq!(lines.len(), 1 + MAX_OUTPUT_LINES + 1);
        assert!(lines[1].ends_with(&"y".repeat(MAX_LINE_BYTES)));
        assert!(lines[1].len() < MAX_LINE_BYTES + 20);
        assert_eq!(
            lines.last().unwrap(),
            "#1 [output clipped, log limit 10000 lines reached]"
        );
    }
}

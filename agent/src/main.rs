//! The `rayito-agent` binary.

fn main() {
    eprintln!("rayito-agent: no command yet");
    std::process::exit(2);
}

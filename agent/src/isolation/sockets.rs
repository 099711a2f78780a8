//! Which processes listen on a TCP port: the emulated proxy forwards a
//! port other than the agent's only to a server of that MicroVM's own
//! sandbox. On the host, every sandbox shares the loopback interface, so
//! `127.0.0.1:<port>` may be another sandbox's server or a host service
//! (a database, an admin page): without this check a proxy token for that
//! port reached it.
//!
//! Read from procfs: the listening sockets on the port (`/proc/net/tcp`,
//! `/proc/net/tcp6`, state `0A`), then the processes holding one of them
//! (`/proc/<pid>/fd/*` naming `socket:[<inode>]`). Bounded: at most
//! [`MAX_TABLE_BYTES`] of each socket table are read.

use std::collections::HashSet;

/// The most bytes of one socket table read (a host with tens of thousands
/// of sockets is cut there, and a port past it is reported as not served).
const MAX_TABLE_BYTES: u64 = 16 * 1024 * 1024;
/// `st` of a listening socket in the tables.
const TCP_LISTEN: &str = "0A";

/// The inodes of the sockets listening on TCP `port` (IPv4 and IPv6).
pub(crate) fn listening_inodes(port: u16) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(file) = std::fs::File::open(table) else {
            continue;
        };
        let mut text = String::new();
        use std::io::Read as _;
        if file
            .take(MAX_TABLE_BYTES)
            .read_to_string(&mut text)
            .is_err()
        {
            continue;
        }
        inodes.extend(
            text.lines()
                .skip(1)
                .filter_map(|line| listening_on(line, port)),
        );
    }
    inodes
}

/// The inode of one table line's socket when it listens on `port`.
fn listening_on(line: &str, port: u16) -> Option<u64> {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    let fields: Vec<&str> = line.split_whitespace().collect();
    let local = fields.get(1)?;
    let state = fields.get(3)?;
    let inode = fields.get(9)?;
    let (_, hex_port) = local.rsplit_once(':')?;
    let listening = *state == TCP_LISTEN && u16::from_str_radix(hex_port, 16).ok()? == port;
    listening.then(|| inode.parse().ok()).flatten()
}

/// Whether process `pid` holds one of `inodes`.
pub(crate) fn holds_any(pid: i32, inodes: &HashSet<u64>) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:[")?.strip_suffix(']'))
                .and_then(|inode| inode.parse::<u64>().ok())
                .is_some_and(|inode| inodes.contains(&inode))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_line_listening_on_the_port_gives_its_inode() {
        let line = "   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0";
        assert_eq!(listening_on(line, 8080), Some(4242));
        assert_eq!(listening_on(line, 8081), None);
        let established = line.replace(" 0A ", " 01 ");
        assert_eq!(listening_on(&established, 8080), None);
        assert_eq!(listening_on("garbage", 8080), None);
    }

    #[test]
    fn this_process_is_seen_listening() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let inodes = listening_inodes(port);
        assert!(!inodes.is_empty());
        let me = i32::try_from(std::process::id()).unwrap();
        assert!(holds_any(me, &inodes));
        drop(listener);
        assert!(!holds_any(me, &listening_inodes(port)));
    }
}

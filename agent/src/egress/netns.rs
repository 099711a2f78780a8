//! A sandbox's own network namespace: loopback only, so that nothing in it
//! reaches any other host (deny-all by construction, direct DNS included),
//! and the agent's proxy listener bound inside it, on its 127.0.0.1.
//!
//! Built on a short-lived thread of its own: `unshare(CLONE_NEWNET)`
//! changes the namespace of the calling thread only, and a socket stays in
//! the namespace it was created in after that thread is gone. The namespace
//! lives as long as its descriptor (held by [`SandboxNetNs`]) or a socket
//! in it does.

use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};

use rustix::fs::{Mode, OFlags};

/// A sandbox's network namespace, held by a descriptor.
#[derive(Debug)]
pub(crate) struct SandboxNetNs {
    ns: OwnedFd,
}

impl SandboxNetNs {
    /// The namespace's descriptor, for a child to enter (`setns`).
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.ns.as_fd()
    }

    /// A listener on `127.0.0.1:0` inside this namespace (the secret
    /// gateway's: the sandbox's processes reach it on their loopback).
    /// Blocks briefly: run it off the async workers.
    ///
    /// # Errors
    /// The namespace cannot be entered, or the bind fails.
    pub(crate) fn bind_loopback(&self) -> std::io::Result<std::net::TcpListener> {
        let ns = self.ns.try_clone()?;
        std::thread::Builder::new()
            .name("rayito-netns-bind".into())
            .spawn(move || {
                // setns changes this short-lived thread's namespace only;
                // the socket keeps it after the thread ends.
                rustix::thread::move_into_link_name_space(
                    ns.as_fd(),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )?;
                let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
                listener.set_nonblocking(true)?;
                Ok(listener)
            })?
            .join()
            .map_err(|_| std::io::Error::other("the network namespace thread panicked"))?
    }
}

/// Creates the namespace, brings its loopback up and binds a listener on
/// its 127.0.0.1 (an ephemeral port).
///
/// # Errors
/// The host refuses a network namespace (not root, or no CAP_SYS_ADMIN),
/// or loopback cannot be brought up.
pub(crate) fn create() -> std::io::Result<(SandboxNetNs, std::net::TcpListener)> {
    std::thread::Builder::new()
        .name("rayito-netns".into())
        .spawn(|| {
            // SAFETY: NEWNET only changes this thread's network namespace;
            // it shares no descriptor table change (FILES is not unshared),
            // and this thread ends right after, its sockets handed over.
            unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }?;
            let ns = rustix::fs::open(
                c"/proc/thread-self/ns/net",
                OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            loopback_up()?;
            let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
            listener.set_nonblocking(true)?;
            Ok((SandboxNetNs { ns }, listener))
        })?
        .join()
        .map_err(|_| std::io::Error::other("the network namespace thread panicked"))?
}

/// Sets IFF_UP on `lo` in the current thread's network namespace.
fn loopback_up() -> std::io::Result<()> {
    let sock = std::net::UdpSocket::bind((std::net::Ipv4Addr::UNSPECIFIED, 0));
    // A fresh namespace's loopback is down, so binding 0.0.0.0 still works
    // (no route is needed to bind); an ioctl socket is all it is for.
    let sock = sock?;
    // SAFETY: ifreq is plain old data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the flags of the named interface into
    // `req`, which lives across the call; the descriptor is open.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the union's flags member is what SIOCGIFFLAGS filled in.
    unsafe {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: as above; SIOCSIFFLAGS only reads `req`.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

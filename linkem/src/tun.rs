//! TUN device: attach to an existing (or create a new) `IFF_TUN | IFF_NO_PI`
//! interface by name, non-blocking. Linux only.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca; // _IOW('T', 202, int)
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_NAPI: libc::c_short = 0x0010;

#[repr(C)]
struct IfReqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

impl IfReqFlags {
    fn new(name: &str) -> io::Result<IfReqFlags> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid interface name {name:?} (1-15 bytes)"),
            ));
        }
        let mut req = IfReqFlags {
            name: [0; libc::IFNAMSIZ],
            flags: 0,
            _pad: [0; 22],
        };
        req.name[..bytes.len()].copy_from_slice(bytes);
        Ok(req)
    }
}

/// An open TUN queue.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Open `/dev/net/tun` and attach to interface `name` (created if absent). `napi`: the queue gets a NAPI
    /// context (`IFF_NAPI`, needs CAP_NET_ADMIN): packets written are handed to it instead of being forwarded in
    /// the writer's system call, which moves the kernel's forwarding work off the writing thread when the device's
    /// NAPI is threaded ([`Tun::set_threaded_napi`]).
    pub fn open(name: &str, napi: bool) -> io::Result<Tun> {
        let mut req = IfReqFlags::new(name)?;
        req.flags = IFF_TUN | IFF_NO_PI | if napi { IFF_NAPI } else { 0 };
        let path = c"/dev/net/tun";
        // SAFETY: valid NUL-terminated path; flags are plain ints.
        let raw = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(annotate(io::Error::last_os_error(), "open /dev/net/tun"));
        }
        // SAFETY: `raw` is a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: TUNSETIFF reads/writes an ifreq-sized struct we own.
        let rc =
            unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfReqFlags) };
        if rc < 0 {
            return Err(annotate(io::Error::last_os_error(), "TUNSETIFF"));
        }
        let len = req
            .name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(req.name.len());
        let name = String::from_utf8_lossy(&req.name[..len]).into_owned();
        Ok(Tun { fd, name })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Run the device's NAPI in its own kernel thread (`/sys/class/net/NAME/threaded`; needs a writable sysfs,
    /// which an unprivileged container does not have).
    pub fn set_threaded_napi(&self) -> io::Result<()> {
        std::fs::write(format!("/sys/class/net/{}/threaded", self.name), b"1")
    }

    /// Set the interface administratively up (best effort helper).
    pub fn set_up(&self) -> io::Result<()> {
        // SAFETY: plain socket call.
        let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if s < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh fd we own.
        let sock = unsafe { OwnedFd::from_raw_fd(s) };
        let mut req = IfReqFlags::new(&self.name)?;
        // SAFETY: SIOC[GS]IFFLAGS use an ifreq-sized struct we own.
        unsafe {
            if libc::ioctl(
                sock.as_raw_fd(),
                libc::SIOCGIFFLAGS as _,
                &mut req as *mut IfReqFlags,
            ) < 0
            {
                return Err(io::Error::last_os_error());
            }
            req.flags |= libc::IFF_UP as libc::c_short;
            if libc::ioctl(
                sock.as_raw_fd(),
                libc::SIOCSIFFLAGS as _,
                &mut req as *mut IfReqFlags,
            ) < 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Read one packet; `WouldBlock` when none is waiting.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for writes of buf.len() bytes.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Read one packet into `buf` (replacing its contents) without an extra copy: the packet lands in `buf`'s
    /// spare capacity, and only a packet longer than that spills into `overflow` and is appended from there.
    /// `WouldBlock` when none is waiting.
    pub fn read_into(&self, buf: &mut Vec<u8>, overflow: &mut [u8]) -> io::Result<usize> {
        buf.clear();
        let spare = buf.spare_capacity_mut();
        let cap = spare.len();
        let iov = [
            libc::iovec {
                iov_base: spare.as_mut_ptr().cast(),
                iov_len: cap,
            },
            libc::iovec {
                iov_base: overflow.as_mut_ptr().cast(),
                iov_len: overflow.len(),
            },
        ];
        // SAFETY: both iovecs describe writable memory we own for their whole length.
        let n = unsafe { libc::readv(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        // SAFETY: the kernel initialized the first min(n, cap) bytes of the spare capacity.
        unsafe { buf.set_len(n.min(cap)) };
        if n > cap {
            buf.extend_from_slice(&overflow[..n - cap]);
        }
        Ok(n)
    }

    /// Write one packet; `WouldBlock` when the device cannot take it now.
    pub fn write(&self, pkt: &[u8]) -> io::Result<usize> {
        // SAFETY: pkt is valid for reads of pkt.len() bytes.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn annotate(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

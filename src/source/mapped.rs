//! A landing file's text, owned or mapped from the page cache: an uncompressed local file
//! is mapped read-only ([`map_file`]) instead of read into a fresh buffer, so staging
//! neither copies it nor faults in new memory for it.
//!
//! A mapped file that shrinks while it is mapped would raise `SIGBUS` on the next read of
//! a page past its new end. Each mapping is registered, and one `SIGBUS` handler (installed
//! once, chained to the one before it) replaces the rest of a registered mapping with zero
//! pages and returns: the read sees zeros, the run goes on. A file that changed while it was
//! read is then refused before any table is written: staging compares every mapped
//! file's size and modification time with what discovery saw ([`check_unchanged_after`]).
//! A fault outside a registered mapping goes to the handler before (Rust's own, or the
//! default: the process ends as it would have).

use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::path::Path;

use crate::error::{Error, Result};

/// A file's text: bytes read (or decoded) into memory, or the file mapped.
#[derive(Debug)]
pub enum Text {
    /// Bytes in memory.
    Owned(Vec<u8>),
    /// The file mapped read-only, up to `len`.
    Mapped(Mapping),
}

impl Default for Text {
    fn default() -> Self {
        Text::Owned(Vec::new())
    }
}

impl From<Vec<u8>> for Text {
    fn from(v: Vec<u8>) -> Self {
        Text::Owned(v)
    }
}

impl Deref for Text {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Text::Owned(v) => v,
            Text::Mapped(m) => m,
        }
    }
}

impl Text {
    /// Keeps the first `n` bytes.
    pub fn truncate(&mut self, n: usize) {
        match self {
            Text::Owned(v) => v.truncate(n),
            Text::Mapped(m) => m.len = m.len.min(n),
        }
    }

    /// Whether the text is a mapping of its file.
    pub fn is_mapped(&self) -> bool {
        matches!(self, Text::Mapped(_))
    }
}

/// A read-only mapping of a whole file, registered with the `SIGBUS` handler until it is
/// unmapped.
#[derive(Debug)]
pub struct Mapping {
    ptr: usize,
    /// Mapped bytes (the file's size when it was mapped).
    mapped: usize,
    /// Bytes of it the text is (a prefix).
    len: usize,
    /// Its slot in [`SLOTS`].
    slot: usize,
}

impl Deref for Mapping {
    type Target = [u8];
    #[allow(unsafe_code)]
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is a live read-only mapping of `mapped >= len` bytes until drop;
        // pages a shrunken file no longer backs read as zeros (the SIGBUS handler), and
        // nothing writes through the mapping. Bytes another process rewrites in place can
        // change under this slice; staging refuses the file afterwards (its size and
        // modification time), before anything read from it is written.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapping {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        release_slot(self.slot);
        // SAFETY: the mapping of `mapped` bytes at `ptr` made by `map_file`, unmapped once.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.mapped);
        }
    }
}

// Mapped memory is read-only and owned by the `Mapping`: it may move between threads.
#[allow(unsafe_code)]
// SAFETY: see above; no interior mutability.
unsafe impl Send for Mapping {}
#[allow(unsafe_code)]
// SAFETY: shared reads of read-only memory.
unsafe impl Sync for Mapping {}

/// Mappings live at once, at most: beyond, files are read. (Linux allows 65,530
/// mappings per process by default; a batch's files stay mapped until staged.)
const SLOTS_MAX: usize = 16_384;
/// Files smaller than this are read: a mapping costs more than copying a few pages.
const MAP_MIN: u64 = 16 << 10;

/// A registered mapping: its start (0: free) and length.
struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
};
static SLOTS: [Slot; SLOTS_MAX] = [FREE; SLOTS_MAX];
/// Where the search for a free slot starts.
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Slots taken (a mapping may not be made beyond [`SLOTS_MAX`]).
static TAKEN: AtomicUsize = AtomicUsize::new(0);

fn take_slot(start: usize, len: usize) -> Option<usize> {
    if TAKEN.fetch_add(1, Ordering::AcqRel) >= SLOTS_MAX {
        TAKEN.fetch_sub(1, Ordering::AcqRel);
        return None;
    }
    let from = NEXT.fetch_add(1, Ordering::Relaxed);
    for i in (0..SLOTS_MAX).map(|k| (from + k) % SLOTS_MAX) {
        let slot = &SLOTS[i];
        if slot
            .start
            .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            slot.len.store(len, Ordering::Release);
            slot.start.store(start, Ordering::Release);
            return Some(i);
        }
    }
    TAKEN.fetch_sub(1, Ordering::AcqRel);
    None
}

fn release_slot(i: usize) {
    SLOTS[i].start.store(0, Ordering::Release);
    TAKEN.fetch_sub(1, Ordering::AcqRel);
}

/// Local file `path` (discovery saw `bytes` of it) mapped, when it has at least
/// [`MAP_MIN`] bytes and the `SIGBUS` guard is installed; `Ok(None)` to read it instead.
/// Fails when the file is not the size discovery saw.
#[cfg(unix)]
#[allow(unsafe_code)]
pub fn map_file(path: &Path, bytes: u64) -> Result<Option<Text>> {
    use std::os::fd::AsRawFd as _;
    if bytes < MAP_MIN || !guard_installed() {
        return Ok(None);
    }
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let size = f.metadata().map_err(|e| Error::io(path, e))?.len();
    if size != bytes {
        return Err(Error::FileChanged {
            path: path.to_path_buf(),
            before: bytes,
            after: size,
        });
    }
    let Ok(len) = usize::try_from(size) else {
        return Ok(None);
    };
    // SAFETY: a fresh read-only private mapping of the open file's `len` bytes; the
    // kernel chooses the address. `MAP_POPULATE` maps the cached pages in one call.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE | populate(),
            f.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Ok(None);
    }
    let Some(slot) = take_slot(ptr as usize, len) else {
        // SAFETY: the mapping just made, never shared.
        unsafe { libc::munmap(ptr, len) };
        return Ok(None);
    };
    Ok(Some(Text::Mapped(Mapping {
        ptr: ptr as usize,
        mapped: len,
        len,
        slot,
    })))
}

/// Other systems read every file.
#[cfg(not(unix))]
pub fn map_file(_path: &Path, _bytes: u64) -> Result<Option<Text>> {
    Ok(None)
}

#[cfg(target_os = "linux")]
fn populate() -> libc::c_int {
    libc::MAP_POPULATE
}

#[cfg(all(unix, not(target_os = "linux")))]
fn populate() -> libc::c_int {
    0
}

/// Refuses file `path`, read from its mapping, when it no longer has the size (`bytes`)
/// and modification time (`modified`, microseconds since the epoch) discovery saw: it
/// changed while the run read it (perhaps into zero pages, if it shrank).
pub fn check_unchanged_after(path: &Path, bytes: u64, modified: Option<i64>) -> Result<()> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let now = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_micros()).ok());
    if meta.len() != bytes || (modified.is_some() && now != modified) {
        return Err(Error::FileChanged {
            path: path.to_path_buf(),
            before: bytes,
            after: meta.len(),
        });
    }
    Ok(())
}

/// Whether the `SIGBUS` handler is installed (it is, once, on the first call).
#[cfg(unix)]
fn guard_installed() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(sigbus::install)
}

#[cfg(unix)]
#[allow(unsafe_code)]
mod sigbus {
    //! The `SIGBUS` handler of mapped landing files.

    use super::{Ordering, SLOTS};
    use std::sync::OnceLock;

    /// The handler before ours, called for faults outside our mappings.
    static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

    /// Installs the handler; `false` when the system refuses.
    pub(super) fn install() -> bool {
        // SAFETY: `sigaction` with a zeroed struct filled as POSIX describes; the old
        // action is kept for the faults that are not ours.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                on_sigbus;
            action.sa_sigaction = handler as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
            libc::sigemptyset(&mut action.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &action, &mut old) != 0 {
                return false;
            }
            let _ = PREVIOUS.set(old);
        }
        true
    }

    /// A fault in a registered mapping: its pages from the faulting one on become zero
    /// pages (an anonymous mapping in place), and the read is retried. Any other fault:
    /// the previous handler.
    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler.
        let addr = unsafe { (*info).si_addr() } as usize;
        // SAFETY: `sysconf` is async-signal-safe.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        for slot in &SLOTS {
            let start = slot.start.load(Ordering::Acquire);
            if start == 0 || start == usize::MAX {
                continue;
            }
            let len = slot.len.load(Ordering::Acquire);
            if addr < start || addr >= start + len {
                continue;
            }
            let from = addr & !(page - 1);
            let end = (start + len).div_ceil(page) * page;
            // SAFETY: replaces pages of our own registered mapping, from the faulting
            // page to its end, with zero pages; nothing else lives there. `mmap` is a
            // plain system call.
            let zeros = unsafe {
                libc::mmap(
                    from as *mut libc::c_void,
                    end - from,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if zeros != libc::MAP_FAILED {
                return;
            }
        }
        // SAFETY: the action saved at install; called as its flags say.
        unsafe { previous(sig, info, ctx) }
    }

    /// Hands a fault that is not ours to the handler before: a function, or the
    /// default action (restored, so the retried read ends the process as it would have).
    unsafe fn previous(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let Some(old) = PREVIOUS.get() else {
            return restore_default(sig);
        };
        match old.sa_sigaction {
            libc::SIG_DFL | libc::SIG_IGN => restore_default(sig),
            f if old.sa_flags & libc::SA_SIGINFO != 0 => {
                // SAFETY: an `SA_SIGINFO` handler has this signature.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(f) };
                f(sig, info, ctx)
            }
            f => {
                // SAFETY: a plain handler has this signature.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(f) };
                f(sig)
            }
        }
    }

    fn restore_default(sig: libc::c_int) {
        // SAFETY: the default action for `sig`; the faulting read runs again and ends the
        // process with the signal, as without our handler.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn modified(path: &std::path::Path) -> Option<i64> {
        let meta = std::fs::metadata(path).unwrap();
        meta.modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_micros()).ok())
    }

    #[test]
    fn a_file_that_shrinks_while_mapped_reads_as_zeros_and_is_refused_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part-0.jsonl");
        let line = b"{\"topic\":\"t\",\"message_id\":\"1\",\"payload\":{\"a\":1}}\n";
        let text: Vec<u8> = line.iter().copied().cycle().take(256 << 10).collect();
        std::fs::write(&path, &text).unwrap();
        let (bytes, seen) = (text.len() as u64, modified(&path));
        let mapped = map_file(&path, bytes)
            .unwrap()
            .expect("a 256 KiB file is mapped");
        assert!(mapped.is_mapped());
        assert_eq!(&mapped[..], &text[..]);
        // Another process truncates it: reading past the new end would be SIGBUS.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let tail: u64 = mapped[200 << 10..].iter().map(|&b| u64::from(b)).sum();
        assert_eq!(tail, 0, "pages past the new end read as zeros");
        assert_eq!(&mapped[..4096], &text[..4096]);
        let err = check_unchanged_after(&path, bytes, seen)
            .unwrap_err()
            .to_string();
        assert!(err.contains("part-0.jsonl"), "{err}");
        drop(mapped);
        // Small files are read.
        std::fs::write(&path, b"{}\n").unwrap();
        assert!(map_file(&path, 3).unwrap().is_none());
    }

    #[test]
    fn a_mapped_text_truncates_to_a_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        std::fs::write(&path, vec![b'x'; 64 << 10]).unwrap();
        let mut t = map_file(&path, 64 << 10).unwrap().unwrap();
        t.truncate(10);
        assert_eq!(t.len(), 10);
        assert_eq!(t.to_vec(), vec![b'x'; 10]);
    }
}

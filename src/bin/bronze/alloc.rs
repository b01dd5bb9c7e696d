//! The binary's allocator tuning: glibc's arena cap at start, and freed memory handed
//! back to the operating system when the library says a run has just freed much of it
//! ([`bronze::MemoryRelease`]). Process-wide calls, so they live in the binary: a
//! program linking the library decides its own allocator policy.
//!
//! Allocators keep memory freed by a thread in that thread's arena for reuse; a
//! staging chunk or a wave of topics frees tens of megabytes at once, and without a trim
//! the process's resident size keeps the high-water mark of every arena. Measured on the
//! historical batch at a budget of a third of it: the live heap peaks under the budget
//! (valgrind massif) while RSS sat at twice that before trimming (BENCHMARKS.md).

/// The hook the binary gives the library ([`bronze::IngestBuilder::with_memory_release`]):
/// after in-memory staging, glibc's free heap pages go back to the OS (jemalloc's arenas
/// keep theirs for flattening, which needs as much again: purging them cost 40k page
/// faults, 2 % of the CPU; BENCHMARKS.md); between the phases of an over-budget batch,
/// every arena's (glibc's and, with the `jemalloc` feature, jemalloc's).
pub fn release(when: bronze::MemoryRelease) {
    trim_glibc();
    #[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
    if when == bronze::MemoryRelease::BetweenPhases {
        purge_jemalloc();
    }
    #[cfg(not(all(feature = "jemalloc", not(target_env = "msvc"))))]
    let _ = when;
}

/// Returns glibc's free heap pages to the OS (a no-op off glibc); other allocators keep
/// theirs for the next allocations.
fn trim_glibc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    trim_glibc_heap();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim_glibc_heap() {
    // SAFETY: `malloc_trim` takes no pointers and only walks the allocator's own arenas
    // under their locks; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `arena.<MALLCTL_ARENAS_ALL>.purge`: every arena's unused dirty pages back to the OS.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[allow(unsafe_code)]
fn purge_jemalloc() {
    const PURGE_ALL: &[u8] = b"arena.4096.purge\0";
    // SAFETY: the name is NUL-terminated; a purge reads and writes no value, so every
    // pointer argument is null and the lengths are zero, as mallctl(3) specifies.
    let failed = unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if failed != 0 {
        tracing::debug!(error = failed, "jemalloc purge failed");
    }
}

/// Caps glibc's malloc arenas at two per core (glibc's default is eight per core), unless
/// `MALLOC_ARENA_MAX` is set. Call it first thing in `main`, before threads start.
///
/// Every thread that allocates gets an arena and each arena keeps its own high-water
/// mark, so a run over the memory budget held ~50 MB more with the default (historical
/// batch at a budget of a third of it: 235 MB peak RSS with 16 arenas, 210 MB with 4,
/// 187 MB with 2, at no cost to the in-memory path with 4, 25-35 % slower with 2;
/// BENCHMARKS.md). A no-op off glibc.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let arenas = i32::try_from(2 * cores).unwrap_or(i32::MAX);
        set_arena_max(arenas);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn set_arena_max(arenas: i32) {
    // SAFETY: `mallopt` only sets an allocator parameter; it takes no pointers.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

//! How the `skein` process asks the kernel for memory.
//!
//! A simulation grows its heap steadily (logs in memory, the client history, the checker's
//! records) and frees and reuses it at a high rate. With transparent huge pages, each first
//! touch of a 2 MiB region is a fault that zeroes all of it: on the 2-core VM of
//! docs/PERFORMANCE.md that was 12.8% of `skein sim bench`'s wall time in the kernel's
//! `clear_page_erms` (0.24-0.33 s of system time per bench), against 0.06-0.10 s with
//! 4 KiB pages, for the same user time. A simulation walks its memory once and briefly, so
//! huge pages buy it no TLB reach worth that; a long-running broker keeps the system's
//! policy.
//!
//! The process allocates through mimalloc ([`Allocator`]).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// mimalloc, asked by the cheapest entry point that gives the layout's alignment.
///
/// The `mimalloc` crate's `MiMalloc` sends every request through `mi_malloc_aligned`,
/// whose extra checks sit on the path of every allocation a simulation makes. Every
/// mimalloc block is aligned to a machine word (its size classes are whole words), so for
/// alignments up to a word plain `mi_malloc`/`mi_zalloc`/`mi_realloc` already give what is
/// asked, as glibc's `malloc` does for Rust's `System` allocator; larger alignments keep
/// the aligned calls.
pub struct Allocator;

/// The alignment every mimalloc block has, whatever its size.
const WORD: usize = std::mem::size_of::<usize>();

// SAFETY: each call forwards to mimalloc, which returns blocks of at least the size asked,
// aligned to a word (so to `layout.align()` whenever that is at most a word, and by the
// aligned calls otherwise), or null; `mi_free`/`mi_realloc` accept any block it returned.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_malloc(layout.size()) as *mut u8
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_zalloc(layout.size()) as *mut u8
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: see the impl.
        unsafe { mi::mi_free(ptr as *mut c_void) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8
            } else {
                mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
            }
        }
    }
}

/// Turns transparent huge pages off for this process (Linux `PR_SET_THP_DISABLE`), unless
/// `SKEIN_SIM_THP=keep` asks to keep the system's policy. Returns whether they are off
/// (a kernel without the option, or a sandbox refusing it, leaves them as they were).
pub fn no_huge_pages_for_simulation() -> bool {
    if keeps_policy(std::env::var("SKEIN_SIM_THP").ok().as_deref()) {
        return false;
    }
    disable_thp()
}

/// Whether `SKEIN_SIM_THP`'s value asks to keep the system's policy.
fn keeps_policy(setting: Option<&str>) -> bool {
    setting == Some("keep")
}

#[cfg(target_os = "linux")]
fn disable_thp() -> bool {
    // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integers and changes only this
    // process's memory policy; a kernel without it returns an error, which we ignore.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn disable_thp() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `p` is a multiple of `align` (a power of two).
    fn aligned(p: *mut u8, align: usize) -> bool {
        (p as usize) & (align - 1) == 0
    }

    /// Every size class, every alignment a layout can ask (up to a page), zeroing and
    /// growing: what comes back is aligned, zeroed where asked, and keeps its contents.
    #[test]
    fn the_allocator_honours_size_alignment_zeroing_and_contents() {
        let a = Allocator;
        for align in (0..=12).map(|k| 1usize << k) {
            for size in (1..=2048).step_by(7).chain([4096, 70_000, 1 << 20]) {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero sizes; each block is freed once with its own layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null() && aligned(p, align), "{size}/{align}");
                    std::ptr::write_bytes(p, 0xA5, size);
                    let grown = a.realloc(p, layout, size * 2 + 1);
                    assert!(!grown.is_null() && aligned(grown, align));
                    assert!((0..size).all(|i| *grown.add(i) == 0xA5), "{size}/{align}");
                    a.dealloc(grown, Layout::from_size_align(size * 2 + 1, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert!(!z.is_null() && aligned(z, align));
                    assert!((0..size).all(|i| *z.add(i) == 0), "{size}/{align}");
                    a.dealloc(z, layout);
                }
            }
        }
    }

    #[test]
    fn only_keep_keeps_the_policy() {
        assert!(keeps_policy(Some("keep")));
        assert!(!keeps_policy(None));
        assert!(!keeps_policy(Some("")));
        assert!(!keeps_policy(Some("off")));
    }

    /// When the kernel takes the call, it reports huge pages off for the process.
    #[cfg(target_os = "linux")]
    #[test]
    fn huge_pages_are_off_after_the_call() {
        if std::env::var_os("SKEIN_SIM_THP").is_some() || !disable_thp() {
            eprintln!("skipped: SKEIN_SIM_THP is set, or this kernel refuses PR_SET_THP_DISABLE");
            return;
        }
        // SAFETY: PR_GET_THP_DISABLE takes no pointers; it returns the flag.
        let flag = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(
            flag, 1,
            "the kernel took PR_SET_THP_DISABLE but does not report it"
        );
    }
}

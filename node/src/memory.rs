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

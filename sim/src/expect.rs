//! What a run is expected to give: a pass, or named invariants failing (a scenario's
//! `[expect]` section, parsed in [`crate::scenario`]). Below the configuration and the
//! scenario format, which both carry one.

use crate::report::SimReport;
use std::fmt;

/// The expected outcome of a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    Pass,
    /// The named invariant must be violated (others may fail too).
    Fail {
        invariant: String,
    },
    /// Every invariant in `fail` must be violated and every one in `hold` must not be
    /// (`[expect] verdict = "fail"` with `fail = [...]` and/or `hold = [...]`).
    /// `may` is allowed alongside `fail`/`hold` to state intent; with a "fail" verdict an
    /// invariant in no list is unconstrained anyway, so `may` changes nothing there.
    Invariants {
        fail: Vec<String>,
        hold: Vec<String>,
        may: Vec<String>,
    },
    /// `verdict = "pass"` with `may = [...]`: every invariant holds except those in `may`,
    /// which are allowed, not required, to fail (acknowledged loss under unclean election).
    PassExcept {
        may: Vec<String>,
    },
}

impl Expect {
    /// Whether a run whose failed invariants are `failed` meets this expectation.
    pub fn met_by(&self, failed: &[&str]) -> bool {
        match self {
            Expect::Pass => failed.is_empty(),
            Expect::Fail { invariant } => failed.contains(&invariant.as_str()),
            Expect::Invariants { fail, hold, .. } => {
                fail.iter().all(|i| failed.contains(&i.as_str()))
                    && hold.iter().all(|i| !failed.contains(&i.as_str()))
            }
            Expect::PassExcept { may } => failed.iter().all(|f| may.iter().any(|m| m == f)),
        }
    }

    /// Whether a report meets this expectation (`None` expects a pass).
    pub fn met(expect: Option<&Expect>, report: &SimReport) -> bool {
        expect
            .unwrap_or(&Expect::Pass)
            .met_by(&report.failed_invariants())
    }

    /// The invariants this expectation requires to fail.
    pub fn failing(&self) -> Vec<&str> {
        match self {
            Expect::Pass | Expect::PassExcept { .. } => Vec::new(),
            Expect::Fail { invariant } => vec![invariant.as_str()],
            Expect::Invariants { fail, .. } => fail.iter().map(String::as_str).collect(),
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Pass => write!(f, "pass"),
            Expect::Fail { invariant } => write!(f, "fail ({invariant})"),
            Expect::Invariants { fail, hold, may } => {
                write!(f, "fail ({})", fail.join(", "))?;
                if !hold.is_empty() {
                    write!(f, ", hold ({})", hold.join(", "))?;
                }
                if !may.is_empty() {
                    write!(f, ", may fail ({})", may.join(", "))?;
                }
                Ok(())
            }
            Expect::PassExcept { may } => write!(f, "pass, may fail ({})", may.join(", ")),
        }
    }
}

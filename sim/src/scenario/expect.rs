//! The `[expect]` section: the verdict a scenario must get, and parsing it.

use super::raw::{Ctx, RawExpect};
use super::ScenarioError;
use std::fmt;
use toml::Spanned;

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
    pub fn met(expect: Option<&Expect>, report: &crate::report::SimReport) -> bool {
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

pub(super) fn parse_expect(cx: &Ctx<'_>, e: Spanned<RawExpect>) -> Result<Expect, ScenarioError> {
    let e_span = e.span();
    let e = e.into_inner();
    let known = |name: &str, span: std::ops::Range<usize>, field: &str| {
        if crate::invariants::NAMES.contains(&name) {
            Ok(name.to_string())
        } else {
            Err(cx.err(
                Some(span),
                field,
                format!(
                    "unknown invariant {name:?}; known: {}",
                    crate::invariants::NAMES.join(", ")
                ),
            ))
        }
    };
    let list =
        |v: &Option<Spanned<Vec<String>>>, field: &str| -> Result<Vec<String>, ScenarioError> {
            match v {
                None => Ok(Vec::new()),
                Some(v) => v
                    .get_ref()
                    .iter()
                    .map(|n| known(n, v.span(), field))
                    .collect(),
            }
        };
    let fail = list(&e.fail, "expect.fail")?;
    let hold = list(&e.hold, "expect.hold")?;
    let may = list(&e.may, "expect.may")?;
    // An invariant in two lists is a contradiction (or a typo): name it.
    for (a, an, b, bn, span) in [
        (&fail, "fail", &may, "may", e.may.as_ref().map(|m| m.span())),
        (&hold, "hold", &may, "may", e.may.as_ref().map(|m| m.span())),
    ] {
        if let Some(both) = a.iter().find(|i| b.contains(i)) {
            return Err(cx.err(
                span,
                &format!("expect.{bn}"),
                format!("{both:?} is in both `{an}` and `{bn}`"),
            ));
        }
    }
    let invariant = e
        .invariant
        .as_ref()
        .map(|i| known(i.get_ref(), i.span(), "expect.invariant"))
        .transpose()?;
    match e.verdict.get_ref().as_str() {
        "pass" => expect_pass(cx, &e, may),
        "fail" => {
            let mut all = fail;
            if let Some(i) = invariant {
                if !all.contains(&i) {
                    all.insert(0, i);
                }
            }
            if all.is_empty() {
                return Err(cx.err(
                    Some(e_span),
                    "expect.invariant",
                    "a \"fail\" verdict must name the invariant that fails (`invariant` or `fail = [...]`)",
                ));
            }
            if let Some(both) = all.iter().find(|i| may.contains(i)) {
                return Err(cx.err(
                    e.may.as_ref().map(|m| m.span()),
                    "expect.may",
                    format!("{both:?} must fail, so it cannot be one that only may"),
                ));
            }
            if let Some(both) = all.iter().find(|i| hold.contains(i)) {
                return Err(cx.err(
                    e.hold.as_ref().map(|h| h.span()),
                    "expect.hold",
                    format!("{both:?} cannot both fail and hold"),
                ));
            }
            if all.len() == 1 && hold.is_empty() && may.is_empty() {
                return Ok(Expect::Fail {
                    invariant: all.remove(0),
                });
            }
            Ok(Expect::Invariants {
                fail: all,
                hold,
                may,
            })
        }
        other => Err(cx.err(
            Some(e.verdict.span()),
            "expect.verdict",
            format!("expected \"pass\" or \"fail\", found {other:?}"),
        )),
    }
}

/// A "pass" verdict: it names no invariant that fails or holds, only ones that may fail.
fn expect_pass(cx: &Ctx<'_>, e: &RawExpect, may: Vec<String>) -> Result<Expect, ScenarioError> {
    if let Some(i) = &e.invariant {
        return Err(cx.err(
            Some(i.span()),
            "expect.invariant",
            "only a \"fail\" verdict names an invariant",
        ));
    }
    if let Some(f) = &e.fail {
        return Err(cx.err(
            Some(f.span()),
            "expect.fail",
            "only a \"fail\" verdict names invariants that fail",
        ));
    }
    if let Some(h) = &e.hold {
        return Err(cx.err(
            Some(h.span()),
            "expect.hold",
            "a \"pass\" verdict already means every invariant holds",
        ));
    }
    if may.is_empty() {
        Ok(Expect::Pass)
    } else {
        Ok(Expect::PassExcept { may })
    }
}

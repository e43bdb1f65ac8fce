//! The `[expect]` section: the verdict a scenario must get, and parsing it.

use super::raw::{Ctx, RawExpect};
use super::ScenarioError;
use crate::expect::Expect;
use toml::Spanned;

pub(super) fn parse_expect(cx: &Ctx<'_>, e: Spanned<RawExpect>) -> Result<Expect, ScenarioError> {
    let e_span = e.span();
    let e = e.into_inner();
    let known = |name: &str, span: std::ops::Range<usize>, field: &str| {
        if crate::violation::NAMES.contains(&name) {
            Ok(name.to_string())
        } else {
            Err(cx.err(
                Some(span),
                field,
                format!(
                    "unknown invariant {name:?}; known: {}",
                    crate::violation::NAMES.join(", ")
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

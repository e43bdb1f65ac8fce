//! The run viewer as a person sees it: a real headless Chromium loads the page written by
//! `skein sim run --html`, and the test reads back the DOM the page's script built (lanes,
//! arrows, fault and violation marks, the replica bands) and the browser's console, and
//! keeps a screenshot in `target/viewer-test/` to look at.
//!
//! Chromium is found as `$SKEIN_CHROMIUM`, else `chromium`, `chromium-browser` or
//! `google-chrome` on the PATH. Without one the browser tests say so and pass, unless
//! `SKEIN_REQUIRE_BROWSER=1` (set by `.ci/run`, which installs Debian's `chromium`).

mod common;

use skein_sim::config::SimConfig;
use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SKEIN_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// The browser, or `None` (with a note) when there is none and none is required.
fn browser() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        assert!(
            std::env::var("SKEIN_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "SKEIN_REQUIRE_BROWSER=1 but no chromium found (install Debian's `chromium`, or set SKEIN_CHROMIUM)"
        );
        eprintln!("viewer browser test skipped: no chromium on the PATH (set SKEIN_CHROMIUM, or install chromium)");
    }
    found
}

fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/viewer-test");
    std::fs::create_dir_all(&d).expect("create target/viewer-test");
    d
}

fn scenario_config(file: &str, bug: &str, seed: u64) -> SimConfig {
    let mut c = common::scenario_config(file, seed);
    c.bugs = vec![bug.to_string()];
    c
}

/// Runs `config` with the recorder and writes its page; returns the path and the report.
fn write_page(config: &SimConfig, name: &str) -> (PathBuf, skein_sim::report::SimReport) {
    let (report, rec) = skein_sim::run_recorded(config, None, None).expect("run");
    let path = out_dir().join(format!("{name}.html"));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("create page"));
    skein_sim::viewer::write_html(&rec, &report, name, &mut f).expect("write page");
    drop(f);
    (path, report)
}

/// What the browser made of the page: the DOM after its script ran, and its console lines.
struct Loaded {
    dom: String,
    console: Vec<String>,
}

impl Loaded {
    fn count(&self, needle: &str) -> usize {
        self.dom.matches(needle).count()
    }

    /// An attribute of the page's `#status` element (the script's own account of what it drew).
    fn status(&self, attr: &str) -> String {
        let start = self
            .dom
            .find("<div id=\"status\"")
            .expect("the page has its #status element");
        let tag = &self.dom[start..start + self.dom[start..].find('>').expect("tag end")];
        let key = format!("{attr}=\"");
        let at = tag
            .find(&key)
            .unwrap_or_else(|| panic!("#status has no {attr}: {tag}"));
        let rest = &tag[at + key.len()..];
        rest[..rest.find('"').expect("quote")].to_string()
    }
}

fn load(browser: &Path, page: &Path, fragment: &str, shot: &str) -> Loaded {
    let url = format!(
        "file://{}{fragment}",
        page.canonicalize().expect("page").display()
    );
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--window-size=1600,1000",
        "--virtual-time-budget=30000",
    ];
    let out = Command::new(browser)
        .args(common)
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom", &url])
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = out_dir().join(format!("{shot}.png"));
    let _ = std::fs::remove_file(&png);
    let s = Command::new(browser)
        .args(common)
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .output()
        .expect("run chromium for the screenshot");
    assert!(s.status.success(), "chromium screenshot failed");
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 20_000,
        "the screenshot {} is empty ({size} bytes)",
        png.display()
    );
    Loaded {
        dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        console: String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_string)
            .collect(),
    }
}

fn assert_clean(l: &Loaded, what: &str) {
    assert_eq!(
        l.status("data-ready"),
        "1",
        "{what}: the page's script did not finish"
    );
    assert_eq!(
        l.status("data-errors"),
        "0",
        "{what}: script errors: {:?}",
        l.dom
            .find("data-last-error")
            .map(|i| &l.dom[i..(i + 300).min(l.dom.len())])
    );
    assert!(
        l.console.is_empty(),
        "{what}: console output: {:?}",
        l.console
    );
}

#[test]
fn a_zoo_bug_page_shows_lanes_arrows_faults_and_the_violation_at_its_moment() {
    // The KIP-101 loss (docs/teaching.md): the zoo's truncate-to-hw, its pinned seed.
    let config = scenario_config(
        "kip101-new-follower-truncates-then-leader-dies.toml",
        "truncate-to-hw",
        1,
    );
    let (page, report) = write_page(&config, "kip101-truncate-to-hw");
    assert!(
        report.failed_invariants().contains(&"acked-write-lost"),
        "the bug must show: {:?}",
        report.failed_invariants()
    );
    let Some(b) = browser() else { return };
    // `sel=violation` opens the page zoomed on the first violation, selected.
    let l = load(&b, &page, "#sel=violation", "kip101-truncate-to-hw");
    assert_clean(&l, "kip101 page");
    // Lanes: three controllers, three brokers, two producers, two consumers, the admin.
    assert!(
        l.count("class=\"lane\"") >= 10,
        "lanes: {}",
        l.count("class=\"lane\"")
    );
    for lane in [
        "controller 1",
        "controller 3",
        "broker 1",
        "broker 2",
        "broker 3",
        "producer 1",
        "consumer 1",
    ] {
        assert!(l.dom.contains(&format!(">{lane}</text>")), "no lane {lane}");
    }
    // Zoomed in, every message is an arrow.
    assert_eq!(l.status("data-mode"), "detail");
    let drawn: usize = l.status("data-drawn-msgs").parse().expect("number");
    assert!(drawn >= 50, "only {drawn} arrows drawn");
    assert!(l.count("<line class=\"msg") >= drawn, "arrows in the DOM");
    assert!(l.count("marker-end=\"url(#arrow)\"") >= 40, "arrowheads");
    // The scenario's faults: the partition and the crash are drawn where they strike.
    assert!(
        l.count("class=\"fault partition\"") >= 1,
        "no partition span"
    );
    assert!(
        l.count("class=\"fault-mark") + l.count("class=\"fault down") >= 1,
        "no crash mark"
    );
    // The violated invariant at its moment, selected, with its detail in the side panel.
    assert!(l.dom.contains("class=\"violation\""), "no violation mark");
    // The first violation is strong-isr: the truncated follower is back in the ISR below the
    // leader's HW (the TLA+ invariant sees the bug before the loss); it is selected, with
    // its detail, and the violation bar links to the loss that follows.
    assert!(
        l.dom.contains("violation: strong-isr"),
        "first violation not selected as strong-isr"
    );
    assert!(
        l.dom.contains("below leader 1's HW") || l.dom.contains("below leader 2's HW"),
        "no strong-isr detail"
    );
    assert!(
        l.dom.contains(">acked-write-lost ×"),
        "the violation bar does not link the acknowledged loss"
    );
    // The partition panel: a leader band with its epoch and ISR, and HW/LEO lines.
    assert!(l.dom.contains("class=\"band leader\""), "no leader band");
    assert!(l.dom.contains("leader e"), "no epoch label");
    assert!(
        l.count("class=\"hw\"") >= 1 && l.count("class=\"leo\"") >= 1,
        "no HW/LEO lines"
    );
    // The client history: operations on the client lanes.
    let ops: usize = l.status("data-drawn-ops").parse().expect("number");
    assert!(ops >= 10, "only {ops} operations drawn");
}

#[test]
fn a_long_default_shaped_run_loads_aggregated_and_zooms_to_arrows() {
    // The default run's shape (every fault kind, groups on), 20 simulated seconds.
    let config = SimConfig {
        seed: 1,
        duration: 20 * skein_sim::time::SECS,
        liveness: 20 * skein_sim::time::SECS / 3,
        ..SimConfig::default()
    };
    let (page, report) = write_page(&config, "default-20s");
    let Some(b) = browser() else { return };
    let l = load(&b, &page, "", "default-20s");
    assert_clean(&l, "whole-run view");
    assert_eq!(
        l.status("data-mode"),
        "aggregate",
        "thousands of messages are binned"
    );
    let visible: usize = l.status("data-visible-msgs").parse().expect("number");
    assert!(visible > 10_000, "only {visible} messages in a 20 s run");
    assert!(l.count("class=\"bin\"") > 100, "density bins drawn");
    assert!(l.dom.contains(&format!(
        "seed {} · trace hash {:016x}",
        report.seed, report.trace_hash
    )));
    // Zoomed to 50 ms, arrows again.
    let z = load(&b, &page, "#t=10.000,10.050", "default-20s-zoomed");
    assert_clean(&z, "zoomed view");
    assert_eq!(z.status("data-mode"), "detail");
    assert!(z.count("<line class=\"msg") > 10, "arrows when zoomed in");
}

#[test]
fn watching_a_run_does_not_change_it() {
    // The viewer reads the run the trace hash covers; it must not move a single event.
    for (config, what) in [
        (
            scenario_config("zombie-leader-partition.toml", "ack-before-isr", 1),
            "zombie leader",
        ),
        (
            SimConfig {
                seed: 7,
                duration: 10 * skein_sim::time::SECS,
                liveness: 3 * skein_sim::time::SECS,
                ..SimConfig::default()
            },
            "default shape, 10 s",
        ),
    ] {
        let plain = common::run(&config);
        let (watched, rec) = skein_sim::run_recorded(&config, None, None).expect("run");
        assert_eq!(
            plain.trace_hash, watched.trace_hash,
            "{what}: the hash moved"
        );
        assert_eq!(plain.events, watched.events, "{what}");
        assert_eq!(
            plain.failed_invariants(),
            watched.failed_invariants(),
            "{what}"
        );
        // It kept what the page draws.
        assert!(
            rec.msgs.sent.len() > 100,
            "{what}: {} messages",
            rec.msgs.sent.len()
        );
        assert!(!rec.replicas.is_empty(), "{what}: no replica states");
        assert!(!rec.history.is_empty(), "{what}: no history");
        let mut page = Vec::new();
        skein_sim::viewer::write_html(&rec, &watched, what, &mut page).expect("write");
        let page = String::from_utf8(page).expect("utf-8");
        assert!(
            !page.contains("{{"),
            "{what}: a template slot was left unfilled"
        );
        assert!(
            !page.contains("<script src") && !page.contains("<link "),
            "{what}: self-contained"
        );
    }
}

//! A `skein cluster up` cluster of real processes (3 brokers on 127.0.0.1, in a temp dir),
//! taken down on drop even when an assertion fails: the Kafka client tests' cluster.

use super::run_with_stdin;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The `skein` binary, logging at info.
pub fn skein() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_skein"));
    c.env("RUST_LOG", "info");
    c
}

/// Runs `cmd` with `stdin` to completion, killed after `limit`.
pub fn run(cmd: Command, stdin: &[u8], limit: Duration) -> Output {
    run_with_stdin(cmd, stdin, limit)
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub struct RunningCluster {
    _tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub bootstrap: String,
}

impl RunningCluster {
    pub fn up() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let mut cmd = skein();
        cmd.args(["cluster", "up", "--brokers", "3", "--dir"])
            .arg(&dir);
        let out = run(cmd, b"", Duration::from_secs(60));
        let mut c = RunningCluster {
            _tmp: tmp,
            dir,
            bootstrap: String::new(),
        };
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "cluster up: {}", text(&out.stderr));
        c.bootstrap = stdout
            .lines()
            .find_map(|l| l.strip_prefix("kafka bootstrap servers: "))
            .unwrap_or_else(|| panic!("no bootstrap servers in {stdout}"))
            .to_string();
        c
    }

    pub fn cluster_file(&self) -> String {
        self.dir.join("cluster.toml").to_str().unwrap().to_string()
    }

    pub fn kafka_addrs(&self) -> Vec<String> {
        self.bootstrap.split(',').map(str::to_string).collect()
    }

    /// `skein ARGS --cluster FILE`, which must succeed; its stdout.
    pub fn skein(&self, args: &[&str]) -> String {
        self.skein_in(args, b"")
    }

    /// [`Self::skein`] with `stdin` fed to the command.
    pub fn skein_in(&self, args: &[&str], stdin: &[u8]) -> String {
        let mut cmd = skein();
        cmd.args(args).args(["--cluster", &self.cluster_file()]);
        let out = run(cmd, stdin, Duration::from_secs(60));
        assert!(
            out.status.success(),
            "skein {args:?}: {}",
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// Every broker's log file, concatenated.
    pub fn logs(&self) -> String {
        (1..=3)
            .map(|i| std::fs::read_to_string(self.dir.join(format!("broker-{i}.log"))))
            .filter_map(Result::ok)
            .collect()
    }
}

impl Drop for RunningCluster {
    fn drop(&mut self) {
        let _ = skein()
            .args(["cluster", "down", "--dir"])
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// kcat on the PATH, or None (then the test skips, unless SKEIN_REQUIRE_KCAT=1).
pub fn kcat() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kcat"))
        .find(|p| p.is_file())
}

/// kcat, or None when the test should skip (a failure with SKEIN_REQUIRE_KCAT=1).
pub fn kcat_or_skip() -> Option<PathBuf> {
    let found = kcat();
    if found.is_none() {
        assert!(
            std::env::var("SKEIN_REQUIRE_KCAT").as_deref() != Ok("1"),
            "SKEIN_REQUIRE_KCAT=1 but no kcat on the PATH (install Debian's `kcat`)"
        );
        eprintln!("kcat test skipped: no kcat on the PATH (apt-get install kcat)");
    }
    found
}

/// `kcat -b BOOTSTRAP ARGS` with `stdin`, which must succeed; its stdout.
pub fn kcat_run(bin: &Path, bootstrap: &str, args: &[&str], stdin: &[u8]) -> String {
    let mut cmd = Command::new(bin);
    cmd.args(["-b", bootstrap]).args(args);
    let out = run(cmd, stdin, Duration::from_secs(120));
    assert!(out.status.success(), "kcat {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// True when `python3 -c "import confluent_kafka"` works.
pub fn confluent_kafka() -> bool {
    Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether to run a confluent-kafka test: false (skip, with a message) when the module is
/// missing, unless SKEIN_REQUIRE_CONFLUENT=1, which turns that into a failure.
pub fn require_confluent() -> bool {
    if confluent_kafka() {
        return true;
    }
    assert!(
        std::env::var("SKEIN_REQUIRE_CONFLUENT").as_deref() != Ok("1"),
        "SKEIN_REQUIRE_CONFLUENT=1 but python3 cannot import confluent_kafka (pip install confluent-kafka)"
    );
    eprintln!(
        "confluent-kafka test skipped: no confluent_kafka module (pip install confluent-kafka)"
    );
    false
}

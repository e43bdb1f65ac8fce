//! The recipes for running a sweep on other engines (docs/sweeps.md) are checked here as far
//! as this machine allows: the GitHub Actions workflow and the Kubernetes Indexed Job parse
//! as YAML, their shard counts agree with themselves, and the shards they start cover every
//! seed of the range exactly once. The Kubernetes pod script is run with `sh` for every
//! completion index, with `skein` replaced by a function that prints its arguments.

use skein_sim::sweep::SweepHeader;
use std::path::PathBuf;
use yaml_rust2::{Yaml, YamlLoader};

fn repo_file(path: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn load(path: &str) -> Yaml {
    let docs = YamlLoader::load_from_str(&repo_file(path))
        .unwrap_or_else(|e| panic!("{path} is not valid YAML: {e}"));
    assert_eq!(docs.len(), 1, "{path}: one document");
    docs.into_iter().next().unwrap()
}

/// Shards 1..=m of a range cover each seed exactly once.
fn assert_cover(shards: &[u64], m: u64, what: &str) {
    let mut sorted = shards.to_vec();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (1..=m).collect::<Vec<_>>(),
        "{what}: shards 1..={m} once each"
    );
    let (start, end) = (17, 17 + 10 * m + 3);
    let mut seen: Vec<u64> = shards
        .iter()
        .flat_map(|&k| SweepHeader::shard_seeds(start, end, k, m))
        .collect();
    seen.sort_unstable();
    assert_eq!(
        seen,
        (start..end).collect::<Vec<_>>(),
        "{what}: every seed once"
    );
}

#[test]
fn github_workflow_shards_cover_every_seed_once_and_merge() {
    let wf = load(".github/workflows/sweep.yml");
    let shards_env = wf["env"]["SHARDS"]
        .as_i64()
        .expect("env.SHARDS is a number") as u64;
    let sweep = &wf["jobs"]["sweep"];
    let matrix: Vec<u64> = sweep["strategy"]["matrix"]["shard"]
        .as_vec()
        .expect("a shard matrix")
        .iter()
        .map(|y| y.as_i64().expect("shard numbers") as u64)
        .collect();
    assert_eq!(
        matrix.len() as u64,
        shards_env,
        "SHARDS = the matrix's length"
    );
    assert_cover(&matrix, shards_env, "workflow matrix");
    let steps = sweep["steps"].as_vec().expect("steps");
    let run = steps
        .iter()
        .filter_map(|s| s["run"].as_str())
        .find(|r| r.contains("sim sweep"))
        .expect("a step runs the sweep");
    assert!(
        run.contains("--shard ${{ matrix.shard }}/${{ env.SHARDS }}"),
        "the sweep step shards by the matrix: {run}"
    );
    assert!(run.contains("--json results/shard-${{ matrix.shard }}.jsonl"));
    let merge = &wf["jobs"]["merge"];
    assert_eq!(merge["needs"].as_str(), Some("sweep"));
    assert_eq!(
        merge["if"].as_str(),
        Some("always()"),
        "merge even when a shard failed"
    );
    let merges = merge["steps"]
        .as_vec()
        .expect("merge steps")
        .iter()
        .filter_map(|s| s["run"].as_str())
        .any(|r| r.contains("skein sim merge results/*.jsonl"));
    assert!(
        merges,
        "the merge job runs skein sim merge over every shard's file"
    );
}

#[test]
fn kubernetes_indexed_job_shards_cover_every_seed_once() {
    let job = load("docs/k8s/sweep-job.yaml");
    assert_eq!(job["kind"].as_str(), Some("Job"));
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let completions = spec["completions"].as_i64().expect("completions") as u64;
    let container = &spec["template"]["spec"]["containers"][0];
    let script = container["args"][0].as_str().expect("the pod script");
    let mut shards = Vec::new();
    for index in 0..completions {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("skein() {{ printf '%s\\n' \"$*\"; }}\n{script}"))
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .env("SEEDS", "0..1000")
            .env("FLAGS", "")
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "index {index}: {out:?}");
        let line = String::from_utf8(out.stdout).unwrap();
        assert!(line.starts_with("sim sweep --seeds 0..1000 "), "{line}");
        let shard = line
            .split_whitespace()
            .skip_while(|w| *w != "--shard")
            .nth(1)
            .expect("--shard K/M");
        let (k, m) = shard.split_once('/').unwrap();
        assert_eq!(m.parse::<u64>().unwrap(), completions, "M = completions");
        assert!(line.contains(&format!("/results/shard-{k}-of-{m}.jsonl")));
        shards.push(k.parse().unwrap());
    }
    assert_cover(&shards, completions, "indexed job");
}

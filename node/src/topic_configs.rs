//! Kafka's topic config names (`cleanup.policy`, `retention.ms`, ...) applied to a Skein
//! [`TopicConfig`]: one parser for `skein topic create --config KEY=VALUE` and the Kafka
//! listener's CreateTopics, so both accept the same names and refuse the same values.

use skein_core::controller::{CleanupPolicy, TopicConfig};

/// The Kafka topic configs Skein understands, in the order they are described.
pub const SUPPORTED: &[&str] = &[
    "min.insync.replicas",
    "retention.ms",
    "retention.bytes",
    "unclean.leader.election.enable",
    "unclean.recovery.strategy",
    "cleanup.policy",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
];

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopicConfigError {
    #[error("config {0:?} is not supported by Skein (supported: {list})", list = SUPPORTED.join(", "))]
    Unknown(String),
    #[error("config {name} = {value:?} is invalid: {reason}")]
    BadValue {
        name: String,
        value: String,
        reason: String,
    },
    #[error("config {0:?} is not KEY=VALUE (e.g. cleanup.policy=compact)")]
    NotAPair(String),
}

/// Splits `KEY=VALUE` (the value may itself hold `=` or `,`: `cleanup.policy=compact,delete`).
pub fn parse_pair(s: &str) -> Result<(String, String), TopicConfigError> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(TopicConfigError::NotAPair(s.to_string())),
    }
}

/// Sets the Kafka-named config `name` to `value` in `config`. Negative `retention.ms` /
/// `retention.bytes` mean "no limit", as in Kafka. The whole config still has to pass
/// [`TopicConfig::validate`] (e.g. min.insync.replicas against the replication factor).
pub fn apply(config: &mut TopicConfig, name: &str, value: &str) -> Result<(), TopicConfigError> {
    let bad = |reason: String| TopicConfigError::BadValue {
        name: name.to_string(),
        value: value.to_string(),
        reason,
    };
    let long = || {
        value
            .parse::<i64>()
            .map_err(|_| bad("not an integer".into()))
    };
    let non_negative = || match long()? {
        v if v < 0 => Err(bad("must not be negative".into())),
        v => Ok(v),
    };
    match name {
        "min.insync.replicas" => {
            config.min_insync_replicas = value
                .parse()
                .map_err(|_| bad("not an integer from 1 to 65535".into()))?;
        }
        "retention.ms" => {
            let ms = long()?;
            config.retention_ms = (ms >= 0).then_some(ms);
        }
        "retention.bytes" => config.retention_bytes = u64::try_from(long()?).ok(),
        "unclean.leader.election.enable" => {
            config.unclean_leader_election = match value.to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => return Err(bad("not true or false".into())),
            };
        }
        "unclean.recovery.strategy" => {
            config.unclean_recovery_strategy = value.parse().map_err(bad)?
        }
        "cleanup.policy" => config.cleanup_policy = value.parse::<CleanupPolicy>().map_err(bad)?,
        "delete.retention.ms" => config.delete_retention_ms = non_negative()?,
        "min.compaction.lag.ms" => config.min_compaction_lag_ms = non_negative()?,
        "min.cleanable.dirty.ratio" => {
            config.min_cleanable_dirty_ratio_permille = ratio_permille(value).map_err(bad)?;
        }
        other => return Err(TopicConfigError::Unknown(other.to_string())),
    }
    Ok(())
}

/// Kafka's `min.cleanable.dirty.ratio` (a double from 0 to 1) in thousandths, as core keeps
/// it (no floats in core state).
fn ratio_permille(value: &str) -> Result<u16, String> {
    let r: f64 = value
        .parse()
        .map_err(|_| "not a number from 0 to 1".to_string())?;
    if !(0.0..=1.0).contains(&r) {
        return Err("must be between 0 and 1".into());
    }
    Ok((r * 1000.0).round() as u16)
}

/// `min.cleanable.dirty.ratio` as Kafka prints it (500 -> "0.5").
pub fn ratio_text(permille: u16) -> String {
    format!("{}", f64::from(permille) / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(pairs: &[&str]) -> Result<TopicConfig, TopicConfigError> {
        let mut c = TopicConfig::default();
        for p in pairs {
            let (k, v) = parse_pair(p)?;
            apply(&mut c, &k, &v)?;
        }
        Ok(c)
    }

    #[test]
    fn compaction_configs_by_kafkas_names() {
        let c = applied(&[
            "cleanup.policy=compact,delete",
            "delete.retention.ms=100",
            "min.compaction.lag.ms=5",
            "min.cleanable.dirty.ratio=0.01",
        ])
        .unwrap();
        assert_eq!(c.cleanup_policy, CleanupPolicy::CompactDelete);
        assert_eq!(c.delete_retention_ms, 100);
        assert_eq!(c.min_compaction_lag_ms, 5);
        assert_eq!(c.min_cleanable_dirty_ratio_permille, 10);
        let log = c.compaction().expect("compact policy compacts the log");
        assert_eq!(log.delete_retention_ms, 100);
        assert_eq!(ratio_text(500), "0.5");
        assert_eq!(ratio_text(10), "0.01");
    }

    #[test]
    fn bad_names_and_values_name_the_key() {
        let unknown = applied(&["segment.jitter.ms=3"]).unwrap_err();
        assert_eq!(
            unknown,
            TopicConfigError::Unknown("segment.jitter.ms".into())
        );
        assert!(unknown.to_string().contains("cleanup.policy"), "{unknown}");
        for (pair, key) in [
            ("cleanup.policy=shred", "cleanup.policy"),
            ("delete.retention.ms=-1", "delete.retention.ms"),
            ("delete.retention.ms=soon", "delete.retention.ms"),
            ("min.compaction.lag.ms=-5", "min.compaction.lag.ms"),
            ("min.cleanable.dirty.ratio=1.5", "min.cleanable.dirty.ratio"),
            (
                "min.cleanable.dirty.ratio=half",
                "min.cleanable.dirty.ratio",
            ),
            (
                "unclean.leader.election.enable=yes",
                "unclean.leader.election.enable",
            ),
        ] {
            let e = applied(&[pair]).unwrap_err();
            assert!(
                matches!(&e, TopicConfigError::BadValue { name, .. } if name == key),
                "{pair}: {e:?}"
            );
            assert!(e.to_string().contains(key), "{e}");
        }
        assert!(matches!(
            applied(&["cleanup.policy"]),
            Err(TopicConfigError::NotAPair(_))
        ));
    }

    #[test]
    fn negative_retention_means_no_limit() {
        let c = applied(&["retention.ms=-1", "retention.bytes=-1"]).unwrap();
        assert_eq!((c.retention_ms, c.retention_bytes), (None, None));
        assert_eq!(applied(&[]).unwrap(), TopicConfig::default());
    }
}

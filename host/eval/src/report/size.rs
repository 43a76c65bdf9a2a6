//! Solved and Faithful per domain and size bucket, with Wilson intervals.

use std::collections::BTreeMap;

use onebrain_roles::EpisodeRecord;
use serde::{Deserialize, Serialize};

use super::Rate;
use crate::metrics::{wilson_interval, SizeBucket};

/// One domain's answered episodes in one size bucket: solved, and Faithful, of the same
/// episodes, each with its 95 % Wilson interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizeRate {
    /// The domain, or `all` for every domain of the strategy together.
    pub domain: String,
    /// The bucket of the objects the tasks' reference problems declare.
    pub bucket: SizeBucket,
    /// Solved (b_T), of the answered episodes.
    pub solved: Rate,
    /// Its interval, as (low, high) shares.
    pub solved_interval: (f64, f64),
    /// Solved and faithful to the reference (C_i), of the same episodes: one the checker did
    /// not check or did not decide is not faithful, as in the held-out rows.
    pub faithful: Rate,
    /// Its interval.
    pub faithful_interval: (f64, f64),
    /// Episodes the checker reported on; with none, Faithful is no figure.
    pub checked: usize,
}

impl SizeRate {
    fn of(domain: &str, bucket: SizeBucket, records: &[&EpisodeRecord]) -> SizeRate {
        let n = records.len();
        let solved = records.iter().filter(|r| r.solved).count();
        let faithful = records
            .iter()
            .filter(|r| r.faithfulness.as_ref().is_some_and(|f| f.solvable && f.faithful))
            .count();
        let interval = |k| wilson_interval(k, n).unwrap_or((0.0, 0.0));
        SizeRate {
            domain: domain.to_string(),
            bucket,
            solved: Rate::new(solved, n),
            solved_interval: interval(solved),
            faithful: Rate::new(faithful, n),
            faithful_interval: interval(faithful),
            checked: records.iter().filter(|r| r.faithfulness.is_some()).count(),
        }
    }
}

/// The rows of the "By size" table for one strategy's answered `episodes` (each with its
/// task's object count): per domain in `domains`' order, its buckets smallest first, then,
/// with more than one domain, every domain together per bucket.
pub(super) fn size_rates(domains: &[String], episodes: &[(&EpisodeRecord, Option<u32>)]) -> Vec<SizeRate> {
    let mut cells: BTreeMap<(usize, SizeBucket), Vec<&EpisodeRecord>> = BTreeMap::new();
    let mut all: BTreeMap<SizeBucket, Vec<&EpisodeRecord>> = BTreeMap::new();
    for &(r, objects) in episodes {
        let d = domains.iter().position(|d| *d == r.domain).unwrap_or(domains.len());
        let bucket = SizeBucket::of(objects);
        cells.entry((d, bucket)).or_default().push(r);
        all.entry(bucket).or_default().push(r);
    }
    let mut rows: Vec<SizeRate> = cells
        .iter()
        .map(|(&(_, bucket), rs)| SizeRate::of(&rs[0].domain, bucket, rs))
        .collect();
    if cells.keys().map(|k| k.0).collect::<std::collections::BTreeSet<_>>().len() > 1 {
        rows.extend(all.iter().map(|(&bucket, rs)| SizeRate::of("all", bucket, rs)));
    }
    rows
}

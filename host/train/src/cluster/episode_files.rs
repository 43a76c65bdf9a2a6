//! The actors' episode files, `OUT/actors/actor-K.jsonl`: one line per group of episodes,
//! appended whole by actor K and read by the learner from the byte offset it has consumed.
//!
//! A group is one line, so the learner never sees half a group. A line that a kill tore is
//! not read until it ends (the actor, restarted, cuts it off and writes the group again).
//! An actor writes its slices in order; a line whose slice the learner has already taken
//! (the same group written twice) is a duplicate and is skipped.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use onebrain_roles::EpisodeRecord;
use serde::{Deserialize, Serialize};

use crate::checkpoint::ActorOffset;
use crate::error::TrainError;

/// One line of an actor's file: a group of episodes of one task, sampled by one policy.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GroupLine {
    /// The actor that sampled it (K of `actors`).
    pub actor: usize,
    /// Actors in the array: a file written under another count belongs to another slicing.
    pub actors: usize,
    /// Its place in the actor's slice: the actor's `slice`-th task. With `actor`, the
    /// group's unique id.
    pub slice: u64,
    /// The task's position in the run's task stream: `slice · actors + actor`.
    pub position: u64,
    /// The parameter version that sampled it: updates the learner had made.
    pub version: u64,
    /// The episodes, `group-size` of them, in sample order.
    pub episodes: Vec<EpisodeRecord>,
}

/// The file actor `actor` appends to, inside the run folder `out`.
pub fn actor_file(out: &Path, actor: usize) -> PathBuf {
    out.join("actors").join(format!("actor-{actor}.jsonl"))
}

/// The whole lines of `path` from byte `offset` on, each with the offset just past it. A
/// missing file has none yet; a last line with no newline is still being written (or was
/// torn by a kill) and is left for a later read. A whole line that is not a group is an
/// error naming the file and the offset.
pub fn read_from(path: &Path, offset: u64) -> Result<Vec<(GroupLine, u64)>, TrainError> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(TrainError::io(path, e)),
    };
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.read_to_end(&mut bytes))
        .map_err(|e| TrainError::io(path, e))?;
    let mut out = Vec::new();
    let mut start = 0;
    while let Some(n) = bytes[start..].iter().position(|&b| b == b'\n') {
        let line = &bytes[start..start + n];
        let at = offset + start as u64;
        let group: GroupLine = serde_json::from_slice(line).map_err(|e| {
            TrainError::Cluster(format!("{} at byte {at}: not a group of episodes ({e})", path.display()))
        })?;
        start += n + 1;
        out.push((group, offset + start as u64));
    }
    Ok(out)
}

/// Why a group was not learned, if it was not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Fresh enough and not seen before: learned.
    Learn,
    /// Sampled by parameters more than `max-staleness` updates old.
    Stale,
}

/// Whether a group sampled by version `version` may be learned at update `update` (the
/// parameters have made `update` updates): at most `max_staleness` updates behind.
pub fn verdict(version: u64, update: u64, max_staleness: u64) -> Verdict {
    if version + max_staleness >= update {
        Verdict::Learn
    } else {
        Verdict::Stale
    }
}

/// Whether `group` repeats one the learner has taken already (its slice is behind `at`).
pub fn is_duplicate(group: &GroupLine, at: &ActorOffset) -> bool {
    group.slice < at.next_slice
}

/// The learner's view of the actors' files: where it has consumed each, and the groups it
/// has read past that but not yet learned.
#[derive(Debug)]
pub struct Inbox {
    actors: usize,
    /// Consumed: what a checkpoint records.
    consumed: Vec<ActorOffset>,
    /// Read up to: past `consumed` by the groups waiting in `pending`.
    read_to: Vec<u64>,
    /// Groups read and not yet taken, by (actor, slice), with the offset just past each.
    pending: std::collections::HashMap<(usize, u64), (GroupLine, u64)>,
    /// Groups skipped as written twice, since this inbox was opened.
    duplicates: u64,
}

/// What [`Inbox::take`] gave for one update.
#[derive(Debug, Default)]
pub struct Taken {
    /// The episodes to learn, each with its group's index in the batch.
    pub records: Vec<(usize, EpisodeRecord)>,
    /// Groups dropped as stale.
    pub stale: u64,
    /// The most updates a learned group's version lagged.
    pub max_lag: u64,
}

impl Inbox {
    /// An inbox over `actors` files, consumed up to `consumed` (a checkpoint's, or none).
    pub fn new(actors: usize, consumed: Vec<ActorOffset>) -> Inbox {
        let read_to = consumed.iter().map(|o| o.offset).collect();
        Inbox { actors, consumed, read_to, pending: Default::default(), duplicates: 0 }
    }

    /// Where each file is consumed.
    pub fn consumed(&self) -> &[ActorOffset] {
        &self.consumed
    }

    /// Groups skipped as written twice so far.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// The actor and slice of stream position `p`.
    pub fn place(&self, p: u64) -> (usize, u64) {
        ((p % self.actors as u64) as usize, p / self.actors as u64)
    }

    /// Reads what the actors of run folder `out` appended since the last read.
    pub fn poll(&mut self, out: &Path) -> Result<(), TrainError> {
        for a in 0..self.actors {
            let path = actor_file(out, a);
            for (g, end) in read_from(&path, self.read_to[a])? {
                self.read_to[a] = end;
                if g.actor != a || g.actors != self.actors {
                    return Err(TrainError::Cluster(format!(
                        "{} holds a group of actor {} of {}, not of actor {a} of {}",
                        path.display(),
                        g.actor,
                        g.actors,
                        self.actors
                    )));
                }
                if is_duplicate(&g, &self.consumed[a]) || self.pending.contains_key(&(a, g.slice)) {
                    self.duplicates += 1;
                    continue;
                }
                self.pending.insert((a, g.slice), (g, end));
            }
        }
        Ok(())
    }

    /// Whether every group of `positions` has been read.
    pub fn has(&self, positions: std::ops::Range<u64>) -> bool {
        positions.into_iter().all(|p| self.pending.contains_key(&self.place(p)))
    }

    /// Takes the groups of `positions` (all read: [`Inbox::has`]) for update `update`, in
    /// order, dropping those more than `max_staleness` updates old, and marks them consumed.
    pub fn take(&mut self, positions: std::ops::Range<u64>, update: u64, max_staleness: u64) -> Taken {
        let mut taken = Taken::default();
        let mut groups = 0;
        for p in positions {
            let (a, slice) = self.place(p);
            let (g, end) = self.pending.remove(&(a, slice)).expect("every group read");
            self.consumed[a] = ActorOffset { offset: end, next_slice: slice + 1 };
            match verdict(g.version, update, max_staleness) {
                Verdict::Stale => taken.stale += 1,
                Verdict::Learn => {
                    taken.max_lag = taken.max_lag.max(update.saturating_sub(g.version));
                    taken.records.extend(g.episodes.into_iter().map(|r| (groups, r)));
                    groups += 1;
                }
            }
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onebrain_roles::Mode;
    use std::io::Write;

    fn group(actor: usize, slice: u64, version: u64) -> GroupLine {
        GroupLine { actor, actors: 2, slice, position: slice * 2 + actor as u64, version, episodes: Vec::new() }
    }

    fn line(g: &GroupLine) -> String {
        format!("{}\n", serde_json::to_string(g).unwrap())
    }

    #[test]
    fn groups_are_read_from_an_offset_and_a_torn_tail_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = actor_file(dir.path(), 1);
        assert!(read_from(&path, 0).unwrap().is_empty(), "no file yet: no groups");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let (a, b) = (line(&group(1, 0, 0)), line(&group(1, 1, 0)));
        let torn = &line(&group(1, 2, 1))[..20];
        std::fs::write(&path, format!("{a}{b}{torn}")).unwrap();

        let got = read_from(&path, 0).unwrap();
        assert_eq!(got.iter().map(|(g, _)| g.slice).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(got[0].1, a.len() as u64);
        assert_eq!(got[1].1, (a.len() + b.len()) as u64);
        // From the second line's start on, only it; the torn line is read once it ends.
        let got = read_from(&path, a.len() as u64).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.slice, 1);
        let rest = &line(&group(1, 2, 1))[20..];
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(rest.as_bytes()).unwrap();
        let got = read_from(&path, (a.len() + b.len()) as u64).unwrap();
        assert_eq!((got[0].0.slice, got[0].0.version), (2, 1));
    }

    #[test]
    fn a_whole_line_that_is_not_a_group_names_its_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("actor-0.jsonl");
        let a = line(&group(0, 0, 0));
        std::fs::write(&path, format!("{a}{{\"slice\": oops}}\n")).unwrap();
        let err = read_from(&path, 0).unwrap_err().to_string();
        assert!(err.contains(&format!("actor-0.jsonl at byte {}", a.len())), "{err}");
    }

    #[test]
    fn a_group_older_than_max_staleness_is_stale() {
        assert_eq!(verdict(3, 3, 0), Verdict::Learn);
        assert_eq!(verdict(2, 3, 0), Verdict::Stale);
        assert_eq!(verdict(1, 3, 2), Verdict::Learn);
        assert_eq!(verdict(0, 3, 2), Verdict::Stale);
    }

    #[test]
    fn a_slice_already_taken_is_a_duplicate() {
        let at = ActorOffset { offset: 100, next_slice: 2 };
        assert!(is_duplicate(&group(0, 1, 0), &at));
        assert!(!is_duplicate(&group(0, 2, 0), &at));
    }

    fn append(out: &Path, g: &GroupLine) {
        let path = actor_file(out, g.actor);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap().write_all(line(g).as_bytes()).unwrap();
    }

    fn with_episodes(mut g: GroupLine, n: usize) -> GroupLine {
        let record = EpisodeRecord {
            task_id: "t".into(),
            mode: Mode::Problem,
            solver_calls: 1,
            planner_calls: 1,
            final_plan: vec!["(a)".into()],
            ..Default::default()
        };
        g.episodes = vec![record; n];
        g
    }

    #[test]
    fn the_inbox_takes_groups_in_stream_order_skips_repeats_and_drops_stale_ones() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let mut inbox = Inbox::new(2, vec![ActorOffset::default(); 2]);
        // Positions 0 (actor 0 slice 0) and 1 (actor 1 slice 0): update 0's batch of two.
        append(out, &with_episodes(group(0, 0, 0), 2));
        inbox.poll(out).unwrap();
        assert!(!inbox.has(0..2), "actor 1's group is not written yet");
        append(out, &with_episodes(group(1, 0, 0), 2));
        append(out, &with_episodes(group(1, 0, 0), 2)); // the same group again
        inbox.poll(out).unwrap();
        assert!(inbox.has(0..2));
        assert_eq!(inbox.duplicates(), 1);
        let t = inbox.take(0..2, 0, 0);
        assert_eq!(t.records.iter().map(|(g, _)| *g).collect::<Vec<_>>(), [0, 0, 1, 1]);
        assert_eq!((t.stale, t.max_lag), (0, 0));
        let size = |k: usize| std::fs::metadata(actor_file(out, k)).unwrap().len();
        assert_eq!(inbox.consumed()[0], ActorOffset { offset: size(0), next_slice: 1 });
        // Actor 1's repeat lies past what was consumed: a learner resumed from here reads it
        // again, and skips it again.
        assert!(inbox.consumed()[1].offset < size(1));
        let mut resumed = Inbox::new(2, inbox.consumed().to_vec());
        resumed.poll(out).unwrap();
        assert_eq!(resumed.duplicates(), 1);

        // Update 2's batch, positions 2 and 3: one group sampled by v0, two updates behind.
        append(out, &with_episodes(group(0, 1, 0), 2));
        append(out, &with_episodes(group(1, 1, 1), 2));
        inbox.poll(out).unwrap();
        let t = inbox.take(2..4, 2, 1);
        assert_eq!((t.stale, t.max_lag, t.records.len()), (1, 1, 2));
        assert_eq!(t.records[0].0, 0, "the learned group is the batch's first");
        assert_eq!(inbox.consumed()[1], ActorOffset { offset: size(1), next_slice: 2 });
    }
}

//! The guard: what a context-free grammar cannot say about a problem, checked per token.
//!
//! - No fact repeats within its section (`:init`, or `:goal` with its polarity), and no object
//!   is declared twice. A token is refused when every way of finishing the fact or name it
//!   starts or continues would be a repeat, not only when it closes one, so the guard never
//!   walks the model into a state the grammar allows but the guard would block. (A name is
//!   such a dead end once it and each extension up to `NAME`'s 24 characters are declared:
//!   a repair declared `on-top-on-top-on-top-on` with all 38 one-character extensions.)
//! - A section takes no new fact once it holds as many as [`Limits`] allow, or once the
//!   tokens left could not close the answer (`:init` keeps room for a short goal).
//! - The goal may not close on a problem equal to one of the [`Candidate`]s to avoid (the
//!   Editor's earlier candidates): same objects, same `:init`, same goal, as sets. The answer
//!   must then add a goal fact, or have differed earlier; the solver's verdict on a repeat is
//!   already known, so a repeat would only spend a verifier call. The goal's last fact (the
//!   last the budget, `max_goal` or the objects have room for, or a bare goal's only one)
//!   may not be the one that completes such a candidate, or the goal could neither close
//!   nor go on.
//! - With [`Guard::forbid_goal_at_init`], the goal may not close while it holds in the stated
//!   initial state (every positive goal fact stated in `:init`, no negative one), the answer
//!   whose plan is empty. The last goal fact there is room for may not be one that holds
//!   there, when every fact before it does.
//! - With [`Guard::forbid_init_mutex`], no `:init` fact may fall in one instance of a mutex
//!   group with a fact stated before it ([`crate::mutex`]): a token is refused when every
//!   way of finishing the fact it starts or continues would.
//!
//! Where the rules together would refuse every token the grammar allows, they give way
//! rather than leave a dead end: the optional ones ([`OPTIONAL_RULES`]) first, then the rest
//! (the constraint records which, `ConstraintStats::relaxations`). The init-mutex campaign
//! (`tests/fuzz.rs`) fails on any such walk, since each is a way of finishing a fact that a
//! check above missed.
//!
//! The guard reads the answer as bytes with a small S-expression scanner: the grammar already
//! guarantees the shape, so the scanner only has to find sections, facts and names.

mod budget;
mod candidate;
#[cfg(test)]
mod fixtures;
mod facts;
mod names;
mod scan;

use std::collections::HashMap;
use std::sync::Arc;

use crate::domain_guard::name_cap;
use crate::guard_rule::GuardRule;
use crate::lark::{Limits, Vocabulary};
use crate::mutex::MutexGroup;
use budget::AND_TOKENS;
pub(crate) use candidate::Candidate;
use names::{completions, name_tokens, prefix_counts};
use scan::{parse_objects, Event, Fact, Scan, Section};

/// The rules a spec may switch on, in the order they give way where the guard would refuse
/// every token: a repeat of an earlier candidate costs one more verifier call and is
/// resampled after generation, while an impossible initial state or a goal that holds at
/// the start is a problem the planner can be gamed with, caught only by the reward.
pub(crate) const OPTIONAL_RULES: [GuardRule; 3] = [GuardRule::Avoid, GuardRule::InitMutex, GuardRule::GoalAtInit];

/// The grammar's longest problem name (`LONGNAME`).
const LONGEST_PROBLEM_NAME: usize = 64;

/// Why the guard holds the facts it does: see the module docs.
#[derive(Clone, Debug)]
pub(crate) struct Guard {
    vocab: Arc<Vocabulary>,
    scan: Scan,
    /// Declared objects, once `(:objects …)` closed (lower-case).
    objects: Option<Vec<(String, String)>>,
    /// The same, names as the answer wrote them (facts must spell them so).
    objects_raw: Vec<(String, String)>,
    /// Per predicate, per argument, the names the grammar allows (set with `objects`).
    arg_sets: HashMap<String, Vec<Vec<String>>>,
    facts: Vec<Fact>,
    limits: Limits,
    max_tokens: usize,
    /// Problems the answer may not end up equal to.
    avoid: Vec<Candidate>,
    /// The goal may not close while it holds in the stated initial state.
    forbid_goal_at_init: bool,
    /// No two `:init` facts may fall in one instance of these groups (empty: the rule is off).
    init_mutex: Arc<Vec<MutexGroup>>,
    /// The longest fact's tokens, counted by the model's tokenizer.
    measured_fact_tokens: Option<usize>,
    /// What negating a goal fact adds (` (not` and `)`), counted by the model's tokenizer.
    negation_tokens: Option<usize>,
    /// What the goal's `(and ` takes before its first fact ([`AND_TOKENS`] until the model's
    /// tokenizer counted it).
    and_tokens: usize,
    /// While the objects are written: the most tokens a name so far takes, by the estimate
    /// ([`name_tokens`], kept by [`Guard::commit`]) or as the model's tokenizer counts it
    /// ([`Guard::measure_name`]), whichever is more.
    longest_name_tokens: usize,
    /// The most tokens a fact's `(` and predicate take, counted by the model's tokenizer
    /// ([`Guard::measure_vocabulary`]); 0 until counted.
    predicate_tokens: usize,
    /// The most tokens a type written after an object's `-` takes, the same way (estimated
    /// at a token a character until counted).
    type_tokens: usize,
    /// Per prefix of a declared object name (lower-case), how many declared names start with
    /// it: a prefix with as many as it has [`completions`] is a dead end.
    name_prefixes: HashMap<String, u128>,
    /// The `(:objects` words `name_prefixes` counts.
    counted_words: usize,
    /// The shortest prefix in `name_prefixes` one name short of a dead end: a shorter name is
    /// none, whatever name a token ends on the way. Checked first, so the mask's walk over
    /// every name token allocates nothing (it took 10-30 ms a mask in `full` answers).
    shortest_near_dead: usize,
}

impl Guard {
    /// A guard over `vocab`'s predicates for an answer of at most `max_tokens` tokens, after
    /// the prompt's `prefix` text (the primer that opened the problem).
    pub(crate) fn new(vocab: Arc<Vocabulary>, limits: Limits, max_tokens: usize, prefix: &[u8]) -> Guard {
        // A token a character until measured ([`Guard::measure_vocabulary`]).
        let type_tokens = vocab.type_names().iter().map(|t| t.len() + 1).max().unwrap_or(0);
        let mut g = Guard {
            vocab,
            scan: Scan::default(),
            objects: None,
            objects_raw: Vec::new(),
            arg_sets: HashMap::new(),
            facts: Vec::new(),
            limits,
            max_tokens,
            avoid: Vec::new(),
            forbid_goal_at_init: false,
            init_mutex: Arc::new(Vec::new()),
            measured_fact_tokens: None,
            negation_tokens: None,
            and_tokens: AND_TOKENS,
            longest_name_tokens: 0,
            predicate_tokens: 0,
            type_tokens,
            name_prefixes: HashMap::new(),
            counted_words: 0,
            shortest_near_dead: usize::MAX,
        };
        g.commit(prefix);
        g
    }

    /// Problems the answer's goal may not close on.
    pub(crate) fn avoid(&mut self, candidates: Vec<Candidate>) {
        self.avoid = candidates;
    }

    /// The goal may not close while it already holds in the answer's own `:init`.
    pub(crate) fn forbid_goal_at_init(&mut self) {
        self.forbid_goal_at_init = true;
    }

    /// No `:init` fact may fall in one instance of one of `groups` with a fact stated before
    /// it.
    pub(crate) fn forbid_init_mutex(&mut self, groups: Vec<MutexGroup>) {
        self.init_mutex = Arc::new(groups);
    }

    /// Whether optional `rule` is on ([`OPTIONAL_RULES`]; the guard's own rules always are).
    pub(crate) fn holds(&self, rule: GuardRule) -> bool {
        match rule {
            GuardRule::Avoid => !self.avoid.is_empty(),
            GuardRule::InitMutex => !self.init_mutex.is_empty(),
            GuardRule::GoalAtInit => self.forbid_goal_at_init,
            _ => true,
        }
    }

    /// This guard with the optional `rules` off, for the one mask where they gave way.
    pub(crate) fn without(&self, rules: &[GuardRule]) -> Guard {
        let mut g = self.clone();
        for rule in rules {
            match rule {
                GuardRule::Avoid => g.avoid.clear(),
                GuardRule::InitMutex => g.init_mutex = Arc::new(Vec::new()),
                GuardRule::GoalAtInit => g.forbid_goal_at_init = false,
                _ => {}
            }
        }
        g
    }

    /// The declared objects as written, once their section closed.
    pub(crate) fn objects(&self) -> Option<&[(String, String)]> {
        self.objects.as_ref().map(|_| self.objects_raw.as_slice())
    }

    fn set_objects(&mut self, objects: Vec<(String, String)>) {
        self.arg_sets = self
            .vocab
            .predicates
            .iter()
            .map(|(p, params)| (p.clone(), params.iter().map(|t| self.vocab.candidates(t, &objects)).collect()))
            .collect();
        self.objects = Some(objects);
    }

    /// Takes in the bytes of the answer's `position`-th token.
    pub(crate) fn commit_token(&mut self, bytes: &[u8], position: usize) {
        self.scan.position = Some(position);
        self.commit(bytes);
        self.scan.position = None;
    }

    /// Takes in bytes the answer now holds.
    pub(crate) fn commit(&mut self, bytes: &[u8]) {
        let mut events = Vec::new();
        self.scan.feed(bytes, &mut events);
        for e in events {
            match e {
                Event::ObjectsClosed(o, raw) => {
                    self.objects_raw = raw;
                    self.set_objects(o)
                }
                Event::Fact(f, ..) => self.facts.push(f),
                Event::Name { .. } | Event::GoalClosed => {}
            }
        }
        // Once per token, not per candidate token: the reserves read the result.
        if let Some(top) = self.scan.stack.last().filter(|t| t.head() == Some(":objects")) {
            let words = top.words[1..].iter().chain([&self.scan.word]);
            let longest = words.map(|w| name_tokens(w)).max().unwrap_or(0);
            self.longest_name_tokens = self.longest_name_tokens.max(longest);
            if top.words.len() != self.counted_words {
                self.counted_words = top.words.len();
                self.name_prefixes = prefix_counts(parse_objects(&top.words[1..]).iter().map(|(n, _)| n.as_str()));
                let near_dead = self.name_prefixes.iter().filter(|(p, n)| **n + 1 >= completions(crate::lark::MAX_NAME.saturating_sub(p.len())));
                self.shortest_near_dead = near_dead.map(|(p, _)| p.len()).min().unwrap_or(usize::MAX);
            }
        }
    }

    /// Whether a token with these bytes may come next, as the `tokens`-th token of the answer.
    pub(crate) fn admits(&self, bytes: &[u8], tokens: usize) -> bool {
        let left = self.max_tokens.saturating_sub(tokens);
        // Padding, not the blank that ends a word (the grammar's separator, which the
        // reserves count).
        let padding = self.scan.word.is_empty() && !bytes.is_empty() && bytes.iter().all(u8::is_ascii_whitespace);
        if padding && left < self.blanks_reserve() {
            return false;
        }
        let mut scan = self.scan.clone();
        scan.position = Some(tokens);
        let mut events = Vec::new();
        scan.feed(bytes, &mut events);
        // The problem's own name (a `full` answer writes it) is held to the budget left, as
        // the domain's names are, so it cannot eat what the objects and facts need.
        if scan.stack.last().is_some_and(|t| t.head() == Some("problem")) && scan.word.len() > name_cap(left, LONGEST_PROBLEM_NAME) {
            return false;
        }
        if let Some(top) = scan.stack.last().filter(|t| t.head() == Some(":objects")) {
            if scan.names_started > self.scan.names_started {
                let open = !scan.word.is_empty() && scan.word != "-" && !top.after_dash;
                let declared = parse_objects(&top.words[1..]).len() + usize::from(open);
                let before = self.objects_declared();
                if declared > before && (left < self.name_start_reserve() || declared > self.limits.max_objects) {
                    return false;
                }
            }
        }
        if let Some(top) = scan.stack.last().filter(|t| t.head() == Some(":objects") && !t.after_dash && scan.word != "-") {
            // A name left where every completion is declared could neither grow nor end:
            // refuse the token that would leave it so (counting names the token ended).
            let before = self.scan.stack.last().filter(|t| t.head() == Some(":objects"));
            // Words the token ended: at most one ended name cannot make a name shorter than
            // the shortest near-dead prefix a dead end (the same skip as `dead_end`'s).
            let new_words = top.words.len().saturating_sub(before.map_or(0, |t| t.words.len()));
            if scan.word.len() >= self.shortest_near_dead || new_words > 1 {
                let before = before.map_or(0, |t| parse_objects(&t.words[1..]).len());
                let ended: Vec<String> = parse_objects(&top.words[1..]).into_iter().skip(before).map(|(n, _)| n).collect();
                if self.exhausted(&scan.word, &ended) {
                    return false;
                }
            }
        }
        let mut new_facts: Vec<&Fact> = Vec::new();
        let mut objects_now = None;
        for e in &events {
            match e {
                Event::Name { repeat: true } => return false,
                Event::Name { repeat: false } => {}
                Event::ObjectsClosed(o, _) => objects_now = Some(o),
                Event::Fact(f, opened_at, whole_goal) => {
                    if self.facts.contains(f) || new_facts.contains(&f) {
                        return false;
                    }
                    if self.breaks_mutex(f, &new_facts) {
                        return false;
                    }
                    // A fact this token opened and closed needed the room to open, too.
                    if *opened_at == Some(tokens) && !self.room_for_fact(f.section, &new_facts, tokens, *whole_goal) {
                        return false;
                    }
                    if f.section == Section::Goal && self.last_goal_fact(*opened_at, tokens, *whole_goal, &new_facts) {
                        if self.repeat_completions(&new_facts).contains(f) {
                            return false;
                        }
                        if self.goal_must_break(&new_facts) && self.holds_initially(f, &new_facts) {
                            return false;
                        }
                    }
                    new_facts.push(f);
                }
                Event::GoalClosed => {
                    if self.would_repeat(objects_now.or(self.objects.as_ref()), &new_facts) {
                        return false;
                    }
                    if self.goal_must_break(&new_facts) {
                        return false;
                    }
                }
            }
        }
        if let Some(o) = objects_now {
            // The token closed the objects and went on: judge the rest with them.
            let mut with = self.clone();
            with.set_objects(o.clone());
            return with.feasible(&scan, &new_facts, tokens);
        }
        self.feasible(&scan, &new_facts, tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::budget::INIT_RESERVE;
    use super::fixtures::guard;

    #[test]
    fn a_repeated_fact_is_refused_before_it_can_close() {
        let g = guard("a b) (:init (on a b) (handempty) ");
        assert_eq!(g.objects().unwrap().len(), 2);
        assert!(!g.admits(b"(handempty)", 10));
        assert!(!g.admits(b"(handempty", 10), "every completion repeats");
        assert!(g.admits(b"(on b a)", 10));
        // `(on a ` has one new completion left, `(on a a)`; after `(on a b` none.
        assert!(g.admits(b"(on a ", 10));
        assert!(!g.admits(b"(on a b", 10));
        assert!(g.admits(b"(on a a", 10));
        // Two copies inside one token are a repeat too.
        assert!(!g.admits(b"(clear a)(clear a)", 10));
    }

    #[test]
    fn goal_facts_are_their_own_section_with_polarity() {
        let g = guard("a b) (:init (on a b)) (:goal (and (on a b) ");
        assert!(!g.admits(b"(on a b)", 10));
        assert!(g.admits(b"(clear a)", 10));
        let g = guard("a b) (:init (on a b)) (:goal (and ");
        assert!(g.admits(b"(on a b)", 10), "a goal may restate an init fact");
    }

    #[test]
    fn repeated_objects_and_exhausted_budgets_are_refused() {
        let g = guard("a b ");
        assert!(!g.admits(b"a ", 5));
        assert!(!g.admits(b"b)", 5));
        assert!(g.admits(b"ab ", 5));
        let g = guard("a b) (:init ");
        assert!(g.admits(b"(", 10));
        assert!(!g.admits(b"(", 400 - INIT_RESERVE + 1), "no room left to finish the answer");
        let g = guard("a ");
        assert!(g.admits(b"b ", 10));
        assert!(!g.admits(b"b ", 400 - g.name_start_reserve() + 1), "no room for another object");
        assert!(!g.admits(b"  ", 399), "blanks cannot eat the last tokens");
        // A repeat at the longest name the grammar allows could neither grow nor end.
        let long = "a".repeat(crate::lark::MAX_NAME);
        let g = guard(&format!("{long} "));
        assert!(!g.admits(long.as_bytes(), 5));
        assert!(g.admits(&long.as_bytes()[1..], 5), "one shorter can still grow");
        assert!(g.admits(b")", 399));
    }
}

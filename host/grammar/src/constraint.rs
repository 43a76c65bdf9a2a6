//! [`ConstraintSpec`] (what to hold an answer to, as data) and [`TokenConstraint`] (the live
//! mask a decoder applies token by token).

use std::sync::Arc;
use std::time::Instant;

use llguidance::Matcher;
use serde::{Deserialize, Serialize};
use toktrie::SimpleVob;

use crate::env::{Lead, TokenEnv, BLANKS_ONLY, BLANKS_THEN_NAME, HAS_STRUCTURE, NAME_ONLY, OPENS};
use crate::domain_guard::DomainGuard;
use crate::guard::{Candidate, Guard, OPTIONAL_RULES};
use crate::guard_rule::GuardRule;
use crate::stats::{ConstraintStats, Relaxation};
use crate::lark::{self, Limits, Objects, Vocabulary};
use crate::GrammarError;

/// Percent of a `full` answer's token budget the domain may take before it must close.
const DOMAIN_SHARE: usize = 45;
/// The longest run of blanks an answer may write, in bytes and in newlines: the most that real
/// PDDL in `../shared/data` and the plugins holds (17 bytes, 16 newlines), with a margin.
const MAX_BLANK_RUN: usize = 24;
const MAX_NEWLINE_RUN: usize = 16;
/// One token in this many may be blanks only: a small model otherwise spends its budget on
/// newlines (SmolLM2 in `full` mode padded every gap to the longest run allowed).
const BLANK_TOKEN_SHARE: usize = 8;
/// What a `full` answer continues: the primer opened the domain.
const FULL_PRIMER: &[u8] = b"(define (domain ";

/// The set of tokens allowed at one position (one bit per vocabulary row).
pub type TokenSet = SimpleVob;

/// What an answer must be, stored with every generation so a learner can rebuild the exact
/// masks the sampler used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "grammar", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ConstraintSpec {
    /// A problem over a given domain, continuing `prefix` (the primer, which opened
    /// `(:objects `). Facts use the domain's predicates with their arity and, once the
    /// objects are declared, only those objects.
    Problem {
        /// The domain PDDL.
        domain: String,
        /// The text the answer continues (the primer).
        prefix: String,
        /// Upper bounds.
        #[serde(default)]
        limits: Limits,
        /// Earlier answers (after the same prefix) this one may not equal: its goal may not
        /// close on the same objects, `:init` and goal, compared as sets.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        avoid: Vec<String>,
        /// The goal may not close while it holds in the answer's own `:init` (its plan would
        /// be empty).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        forbid_goal_at_init: bool,
        /// Mutex groups of the domain: no two `:init` facts may fall in one instance of one
        /// (a state the domain cannot be in). Empty: the rule is off.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        init_mutex: Vec<crate::MutexGroup>,
    },
    /// A domain and then a problem, continuing a primer that opened `(define (domain `. The
    /// problem is held to the predicates, types and constants the answer's domain declared.
    Full {
        /// Upper bounds.
        #[serde(default)]
        limits: Limits,
        /// Earlier answers this one may not equal: with the same domain (compared as text,
        /// up to case, spacing and comments), its goal may not close on the same problem.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        avoid: Vec<String>,
        /// As for [`ConstraintSpec::Problem`]: the problem's goal may not already hold.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        forbid_goal_at_init: bool,
    },
    /// Bounded reasoning, then a ```plan block of the domain's actions over `objects`.
    Plan {
        /// The domain PDDL.
        domain: String,
        /// The task's objects with their types.
        objects: Vec<(String, String)>,
        /// Upper bounds.
        #[serde(default)]
        limits: Limits,
    },
    /// One plan step after a `(` primer, or `done)` (Tree of Thoughts' proposals).
    NextAction {
        /// The domain PDDL.
        domain: String,
        /// The task's objects with their types.
        objects: Vec<(String, String)>,
    },
}

/// A constraint a decoder applies: ask for the allowed tokens, sample one of them, report it.
pub trait TokenConstraint: Send {
    /// The tokens allowed next. End-of-turn tokens are in it only where the answer may end.
    ///
    /// Never empty while the answer is unfinished: the grammar always has a way on, and a
    /// rule on top of it (the guard's, the budgets') never takes the last one away. Where the
    /// rules together would refuse every token the grammar allows, they give way, the
    /// optional ones first ([`GuardRule`]), and [`ConstraintStats::relaxations`] records which
    /// gave way where. Decoding stays sound: the answer still follows the grammar, so it
    /// parses and the verifier judges it, and the relaxation depends only on the tokens so
    /// far, so [`ConstraintSpec::replay`] computes the same masks for the learner. A dead end
    /// would instead leave the sampler a row of −∞ and throw the answer away.
    fn allowed(&mut self) -> Result<TokenSet, GrammarError>;
    /// Tokens the grammar forces from here on (possibly none): a decoder may append them
    /// without sampling, reporting each with [`TokenConstraint::consume`].
    fn forced(&mut self) -> Vec<u32>;
    /// Advances past token `t`, which must be allowed.
    fn consume(&mut self, t: u32) -> Result<(), GrammarError>;
    /// True when the answer is complete and nothing may follow.
    fn finished(&self) -> bool;
    /// The counters so far.
    fn stats(&self) -> ConstraintStats;
}

impl ConstraintSpec {
    /// Checks, without building anything, that the domain this constraint is built from is
    /// inside [`crate::DOMAIN_BOUNDS`]: cheap (a parse and a count), so a caller can refuse a
    /// domain before any model time is spent. [`ConstraintSpec::build`] checks it again.
    pub fn check_bounds(&self) -> Result<crate::DomainSize, GrammarError> {
        let (domain, limits) = match self {
            ConstraintSpec::Problem { domain, limits, .. } | ConstraintSpec::Plan { domain, limits, .. } => (domain, *limits),
            ConstraintSpec::NextAction { domain, .. } => (domain, Limits::default()),
            // The model writes the domain, under a grammar whose lists are inside the bounds.
            ConstraintSpec::Full { .. } => return Ok(crate::DomainSize::default()),
        };
        let vocab = parse_domain(domain, &limits)?;
        Ok(crate::DomainSize::of(&vocab, &limits))
    }

    /// The live constraint for an answer of at most `max_tokens` tokens.
    pub fn build(&self, env: &Arc<TokenEnv>, max_tokens: usize) -> Result<Box<dyn TokenConstraint>, GrammarError> {
        Ok(Box::new(Staged::new(self.clone(), env.clone(), max_tokens)?))
    }

    /// The masks a sampler under this constraint used for `tokens`, position by position (a
    /// forced position's mask holds just its token): what PPO's learner needs to recompute
    /// log-probabilities under the same distribution.
    pub fn replay(&self, env: &Arc<TokenEnv>, max_tokens: usize, tokens: &[u32]) -> Result<Vec<TokenSet>, GrammarError> {
        let mut c = self.build(env, max_tokens)?;
        let mut out = Vec::with_capacity(tokens.len());
        for &t in tokens {
            let m = c.allowed()?;
            if !m.is_allowed(t) {
                return Err(GrammarError::Replay { position: out.len(), token: t });
            }
            out.push(m);
            c.consume(t)?;
        }
        Ok(out)
    }
}

/// The vocabulary of a domain text, once its size is inside the bounds
/// ([`crate::DOMAIN_BOUNDS`]; `limits` sizes the guard's table).
fn parse_domain(text: &str, limits: &Limits) -> Result<Vocabulary, GrammarError> {
    let vocab = onebrain_pddl::parse_domain(text)
        .map(|d| Vocabulary::of(&d))
        .map_err(|e| GrammarError::Domain(e.to_string()))?;
    crate::bounds::check_domain(&vocab, limits)?;
    Ok(vocab)
}

/// The byte offset just past the domain's closing parenthesis in a `full` answer (its primer
/// opened two), or the text's length while the domain is open.
fn domain_end(text: &[u8]) -> usize {
    let mut depth = 2i64;
    let mut comment = false;
    for (i, &b) in text.iter().enumerate() {
        match b {
            b'\n' => comment = false,
            _ if comment => {}
            b';' => comment = true,
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// PDDL text up to what does not change its meaning: case, spacing and `;` comments.
fn normalized(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text).to_ascii_lowercase();
    let code = text.lines().map(|l| l.split(';').next().unwrap_or(""));
    let spaced = code.collect::<Vec<_>>().join(" ").replace('(', " ( ").replace(')', " ) ");
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What the problem guard made of a mask.
struct Guarded {
    /// The mask without the tokens refused; `None`: the whole guard gave way and the mask
    /// stands.
    mask: Option<TokenSet>,
    /// Tokens refused.
    refusals: usize,
    /// The rules that gave way (none where the guard left some token).
    gave_way: Vec<GuardRule>,
}

/// `mask` without the `refused` tokens, or `None` where that leaves none.
fn mask_without(mask: &TokenSet, refused: &[u32]) -> Option<TokenSet> {
    let mut left = mask.clone();
    for &t in refused {
        left.disallow_token(t);
    }
    (!left.is_zero()).then_some(left)
}

/// Which grammar stage an answer is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// `full`: the domain is being written.
    Domain,
    /// The problem's objects are being declared.
    Objects,
    /// The objects are known: facts are held to them.
    Facts,
    /// A grammar with no later stage (plans).
    Only,
}

/// A plan answer's budget: the ```plan block must open while a step and the closing fence
/// still fit, and a step may only start while it and the fence fit. Without it the base
/// model looped `(unstack b b)` steps to the token cap (5 of 72 `direct` answers).
struct PlanBudget {
    /// Tokens of the longest step over the longest object name, its newline included.
    step: usize,
    /// Tokens of the opening fence.
    open: usize,
    /// Tokens of the closing fence.
    close: usize,
}

impl PlanBudget {
    fn new(env: &TokenEnv, vocab: &Vocabulary, objects: &[(String, String)]) -> PlanBudget {
        let longest = objects
            .iter()
            .map(|(n, _)| n.as_str())
            .max_by_key(|n| env.tokenize(format!(" {n}").as_bytes()).len())
            .unwrap_or("x");
        let step = vocab
            .actions
            .iter()
            .map(|(name, params)| env.tokenize(format!("\n({name}{})", format!(" {longest}").repeat(params.len())).as_bytes()).len())
            .max()
            .unwrap_or(4);
        // Slack for a tokenization of the step other than the canonical one.
        PlanBudget { step: step + 2, open: env.tokenize(b"```plan\n").len(), close: env.tokenize(b"\n```").len() }
    }

    /// Where an answer reading `text` is.
    fn place(text: &[u8]) -> PlanPlace {
        let Some(at) = text.windows(7).position(|w| w == b"```plan") else { return PlanPlace::Reasoning };
        let body = &text[at..];
        let opens = body.iter().filter(|&&b| b == b'(').count();
        let closes = body.iter().filter(|&&b| b == b')').count();
        if opens > closes {
            PlanPlace::InStep
        } else {
            PlanPlace::BetweenSteps
        }
    }

    /// Whether, with `left` tokens after the next, some token could be refused at all (the
    /// mask is only walked then).
    fn binds(&self, place: PlanPlace, left: usize) -> bool {
        match place {
            PlanPlace::Reasoning => left < self.open + self.step + self.close,
            PlanPlace::InStep => left < self.step + self.close,
            PlanPlace::BetweenSteps => left + 1 < self.step + self.close,
        }
    }

    /// Whether a token of `bytes` may come next at `place`, with `left` tokens after it;
    /// `after_blank` when the answer so far ends in a blank.
    fn admits(&self, place: PlanPlace, bytes: &[u8], left: usize, after_blank: bool) -> bool {
        let tick = bytes.contains(&b'`');
        let blanks = bytes.iter().all(u8::is_ascii_whitespace);
        match place {
            // Once only a fence, a step and the close fit, the fence must begin.
            PlanPlace::Reasoning => tick || left >= self.open + self.step + self.close,
            // A step opened with room for itself: spacing may not eat that room, beyond the
            // one blank between words that the step's count includes.
            PlanPlace::InStep => !blanks || left >= self.step + self.close || !after_blank,
            PlanPlace::BetweenSteps if bytes.contains(&b'(') => left + 1 >= self.step + self.close,
            PlanPlace::BetweenSteps => tick || !blanks || left >= self.close,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PlanPlace {
    /// Before the ```plan fence.
    Reasoning,
    /// Inside a step's parentheses.
    InStep,
    /// In the block, between steps.
    BetweenSteps,
}

/// A grammar that is rebuilt when the answer has said enough to narrow it (the domain written
/// in `full` mode, the objects declared), plus the guard. A new stage's grammar accepts the
/// whole answer from its start, so the tokens so far are replayed into it.
struct Staged {
    spec: ConstraintSpec,
    env: Arc<TokenEnv>,
    matcher: Matcher,
    stage: Stage,
    vocab: Option<Arc<Vocabulary>>,
    guard: Option<Guard>,
    /// `full` mode, while the domain is written.
    domain_guard: Option<DomainGuard>,
    /// Plans.
    plan_budget: Option<PlanBudget>,
    tokens: Vec<u32>,
    text: Vec<u8>,
    /// Forced tokens not yet consumed, front first.
    queue: Vec<u32>,
    /// Tokens of blanks only so far.
    blank_tokens: usize,
    /// Parenthesis depth of a `full` answer (the primer opened two), outside comments.
    depth: i64,
    /// The domain of a `full` answer is inside a `;` comment.
    in_comment: bool,
    max_tokens: usize,
    stats: ConstraintStats,
}

impl Staged {
    fn new(spec: ConstraintSpec, env: Arc<TokenEnv>, max_tokens: usize) -> Result<Staged, GrammarError> {
        let started = Instant::now();
        let (lark, stage, vocab, guard) = match &spec {
            ConstraintSpec::Problem { domain, prefix, limits, avoid, forbid_goal_at_init, init_mutex } => {
                let vocab = Arc::new(parse_domain(domain, limits)?);
                let mut guard = Guard::new(vocab.clone(), *limits, max_tokens, prefix.as_bytes());
                if *forbid_goal_at_init {
                    guard.forbid_goal_at_init();
                }
                if !init_mutex.is_empty() {
                    guard.forbid_init_mutex(init_mutex.clone());
                }
                guard.measure_vocabulary(|b| env.tokenize(b));
                guard.avoid(avoid.iter().filter_map(|a| Candidate::read(prefix.as_bytes(), a.as_bytes())).collect());
                (lark::problem_continuation(&vocab, &Objects::Unknown, limits), Stage::Objects, Some(vocab), Some(guard))
            }
            ConstraintSpec::Full { limits, .. } => (lark::full_continuation(None, &Objects::Unknown, limits), Stage::Domain, None, None),
            ConstraintSpec::Plan { domain, objects, limits } => {
                (lark::plan_answer(&parse_domain(domain, limits)?, objects, limits), Stage::Only, None, None)
            }
            ConstraintSpec::NextAction { domain, objects } => {
                (lark::next_action(&parse_domain(domain, &Limits::default())?, objects), Stage::Only, None, None)
            }
        };
        let matcher = env.matcher(&lark)?;
        let domain_guard = (stage == Stage::Domain).then(|| DomainGuard::new(FULL_PRIMER));
        let plan_budget = match &spec {
            ConstraintSpec::Plan { domain, objects, limits } => Some(PlanBudget::new(&env, &parse_domain(domain, limits)?, objects)),
            _ => None,
        };
        let mut s = Staged {
            spec,
            env,
            matcher,
            stage,
            vocab,
            guard,
            domain_guard,
            plan_budget,
            tokens: Vec::new(),
            text: Vec::new(),
            queue: Vec::new(),
            blank_tokens: 0,
            depth: 2,
            in_comment: false,
            max_tokens,
            stats: ConstraintStats::default(),
        };
        s.stats.build_ms += started.elapsed().as_secs_f64() * 1e3;
        s.refill_forced();
        Ok(s)
    }

    fn limits(&self) -> Limits {
        match &self.spec {
            ConstraintSpec::Problem { limits, .. } | ConstraintSpec::Full { limits, .. } | ConstraintSpec::Plan { limits, .. } => *limits,
            ConstraintSpec::NextAction { .. } => Limits::default(),
        }
    }

    fn refill_forced(&mut self) {
        if self.queue.is_empty() && !self.matcher.is_stopped() {
            let mut ff = self.matcher.compute_ff_tokens();
            ff.reverse();
            self.queue = ff;
        }
    }

    /// Moves to the next stage when the answer has said what it needs.
    fn advance_stage(&mut self, new_bytes: &[u8]) -> Result<(), GrammarError> {
        if self.stage == Stage::Domain {
            // Parentheses in a `;` comment do not count: the domain grammar lets a comment
            // hold any byte, and a comment like `; (on a b) means …` kept the depth above 0,
            // so the problem never got its grammar, guard or budget (found by fuzzing).
            for &b in new_bytes {
                match b {
                    b'\n' => self.in_comment = false,
                    _ if self.in_comment => {}
                    b';' => self.in_comment = true,
                    b'(' => self.depth += 1,
                    b')' => self.depth -= 1,
                    _ => {}
                }
            }
            if self.depth <= 0 {
                let end = domain_end(&self.text);
                let domain_text = String::from_utf8_lossy(&[FULL_PRIMER, &self.text[..end]].concat()).into_owned();
                // A domain the parser refuses keeps the generic problem grammar; the verifier
                // will name the error. (The domain grammar cannot write one past the bounds.)
                if let Ok(vocab) = parse_domain(&domain_text, &self.limits()) {
                    let vocab = Arc::new(vocab);
                    let limits = self.limits();
                    let mut guard = Guard::new(vocab.clone(), limits, self.max_tokens, b"");
                    if let ConstraintSpec::Full { forbid_goal_at_init: true, .. } = &self.spec {
                        guard.forbid_goal_at_init();
                    }
                    let env = self.env.clone();
                    guard.measure_vocabulary(|b| env.tokenize(b));
                    guard.commit(&self.text[end..]);
                    if let ConstraintSpec::Full { avoid, .. } = &self.spec {
                        // Only an earlier answer with this same domain can be repeated now.
                        let domain = normalized(&self.text[..end]);
                        let same_domain = avoid.iter().map(|a| a.as_bytes()).filter_map(|a| {
                            let end = domain_end(a);
                            (normalized(&a[..end]) == domain).then(|| Candidate::read(b"", &a[end..])).flatten()
                        });
                        guard.avoid(same_domain.collect());
                    }
                    self.guard = Some(guard);
                    self.vocab = Some(vocab.clone());
                    let lark = lark::full_continuation(Some(&vocab), &Objects::Unknown, &limits);
                    self.switch(&lark)?;
                }
                self.stage = Stage::Objects;
            }
        }
        if self.stage == Stage::Objects {
            if let Some(guard) = self.guard.as_mut().filter(|g| g.objects().is_some()) {
                let env = self.env.clone();
                guard.measure_facts(|b| env.tokenize(b));
            }
            if let (Some(guard), Some(vocab)) = (&self.guard, &self.vocab) {
                if let Some(objects) = guard.objects() {
                    let objects = objects.to_vec();
                    let limits = self.limits();
                    let lark = match &self.spec {
                        ConstraintSpec::Full { .. } => lark::full_continuation(Some(vocab), &Objects::Declared(&objects), &limits),
                        _ => lark::problem_continuation(vocab, &Objects::Declared(&objects), &limits),
                    };
                    self.switch(&lark)?;
                    self.stage = Stage::Facts;
                }
            }
        }
        Ok(())
    }

    /// Takes the `refused` tokens out of `mask`, unless that would leave none: then `rule`
    /// gives way, the mask stands and the relaxation is recorded.
    fn restrict(&mut self, mask: &mut TokenSet, refused: &[u32], rule: GuardRule) {
        if refused.is_empty() {
            return;
        }
        match mask_without(mask, refused) {
            Some(guarded) => {
                self.stats.guard_refusals += refused.len() as u64;
                *mask = guarded;
            }
            None => self.record_relaxations(&[rule]),
        }
    }

    /// A forced token is the grammar's only way on, appended with no mask asked for: where
    /// the problem guard would refuse it, its rules give way there as they would in a mask,
    /// and say so. (The guard refuses the tokens that lead there before it comes to that.)
    fn judge_forced(&mut self, t: u32) {
        let mut only = self.env.vocab_set();
        only.allow_token(t);
        if let Some(guarded) = self.guard.as_ref().and_then(|guard| self.guarded(guard, &only)) {
            self.record_relaxations(&guarded.gave_way);
        }
    }

    /// Records that `rules` gave way in the mask of the token being chosen.
    fn record_relaxations(&mut self, rules: &[GuardRule]) {
        if rules.is_empty() {
            return;
        }
        let position = self.tokens.len();
        self.stats.guard_overrides += 1;
        self.stats.relaxations.extend(rules.iter().map(|&rule| Relaxation { position, rule }));
    }

    /// The tokens of `mask` that `guard` refuses as the `position`-th token of the answer.
    fn guard_refusals(&self, guard: &Guard, mask: &TokenSet, position: usize) -> Vec<u32> {
        let mut refused = Vec::new();
        let in_objects = self.stage != Stage::Facts;
        // Tokens that only extend, end or start an object name are judged in O(1).
        let quick = if in_objects { guard.object_names_quick(position) } else { None };
        mask.iter_set_entries(|t| {
            let t = t as u32;
            if self.env.eos().contains(&t) {
                return;
            }
            let flags = self.env.flags(t);
            // A `-` (a type follows) is no object name: the full check judges it.
            let dash = self.env.token(t).iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'-');
            if let Some(q) = quick.as_ref().filter(|_| !dash) {
                let verdict = if flags & NAME_ONLY != 0 {
                    Some(q.extend && !guard.dead_end(self.env.token(t)))
                } else if flags & BLANKS_THEN_NAME != 0 {
                    Some(q.end && q.start && !guard.dead_end(self.env.token(t)))
                } else if flags & BLANKS_ONLY != 0 {
                    Some(q.end && q.blank)
                } else if flags & HAS_STRUCTURE == 0 {
                    Some(true)
                } else {
                    None
                };
                if let Some(ok) = verdict {
                    if !ok {
                        refused.push(t);
                    }
                    return;
                }
            }
            if !guard.admits(self.env.token(t), position) {
                refused.push(t);
            }
        });
        refused
    }

    /// What `guard` makes of `mask`, the next token's; `None` when it refuses nothing.
    fn guarded(&self, guard: &Guard, mask: &TokenSet) -> Option<Guarded> {
        let position = self.tokens.len() + 1;
        let refused = self.guard_refusals(guard, mask, position);
        if refused.is_empty() {
            return None;
        }
        Some(match mask_without(mask, &refused) {
            Some(m) => Guarded { mask: Some(m), refusals: refused.len(), gave_way: Vec::new() },
            None => self.relaxed_guard(guard, mask, position),
        })
    }

    /// Where `guard`'s rules together refuse every token of `mask`: what is left once some
    /// give way. The optional rules ([`OPTIONAL_RULES`]) go first, one at a time in
    /// their order, then all of them, so that the guard's own rules (no repeats, room to close
    /// the answer) hold wherever dropping an optional one is enough; where even that leaves
    /// nothing, the whole guard gives way.
    fn relaxed_guard(&self, guard: &Guard, mask: &TokenSet, position: usize) -> Guarded {
        let on: Vec<GuardRule> = OPTIONAL_RULES.iter().copied().filter(|&r| guard.holds(r)).collect();
        let mut tries: Vec<Vec<GuardRule>> = on.iter().map(|&r| vec![r]).collect();
        if on.len() > 1 {
            tries.push(on.clone());
        }
        for rules in tries {
            let refused = self.guard_refusals(&guard.without(&rules), mask, position);
            if let Some(m) = mask_without(mask, &refused) {
                return Guarded { mask: Some(m), refusals: refused.len(), gave_way: rules };
            }
        }
        let mut gave_way = on;
        gave_way.push(GuardRule::Problem);
        Guarded { mask: None, refusals: 0, gave_way }
    }

    /// Replaces the grammar, replaying the answer so far. If the new grammar refuses the
    /// replay (it should not: it accepts everything the old one did up to here), the old one
    /// stays.
    fn switch(&mut self, lark: &str) -> Result<(), GrammarError> {
        let started = Instant::now();
        let mut m = self.env.matcher(lark)?;
        let ok = m.consume_tokens(&self.tokens).is_ok();
        self.stats.build_ms += started.elapsed().as_secs_f64() * 1e3;
        if ok {
            self.matcher = m;
            self.queue.clear();
            self.stats.stage_switches += 1;
        }
        Ok(())
    }
}

impl TokenConstraint for Staged {
    fn allowed(&mut self) -> Result<TokenSet, GrammarError> {
        if let Some(&t) = self.queue.last() {
            let mut s = self.env.vocab_set();
            s.allow_token(t);
            return Ok(s);
        }
        let started = Instant::now();
        let mut mask = self.matcher.compute_mask().map_err(|e| GrammarError::Mask(e.to_string()))?;
        let past_share = self.tokens.len() * 100 >= self.max_tokens * DOMAIN_SHARE;
        if let Some(dg) = self.domain_guard.as_mut() {
            dg.set_tokens_left(self.max_tokens.saturating_sub(self.tokens.len()));
        }
        if let Some(dg) = self.domain_guard.as_ref().filter(|_| self.stage == Stage::Domain) {
            let quick = dg.quick(past_share);
            let mut refused = Vec::new();
            mask.iter_set_entries(|t| {
                let t = t as u32;
                if self.env.eos().contains(&t) {
                    return;
                }
                let flags = self.env.flags(t);
                let bytes = self.env.token(t);
                let quick_verdict = match quick {
                    Some(q) if flags & NAME_ONLY != 0 => q.names(bytes, 0),
                    Some(q) if flags & BLANKS_ONLY != 0 => Some(q.end),
                    Some(q) if flags & BLANKS_THEN_NAME != 0 => {
                        q.names(bytes, bytes.iter().take_while(|b| b.is_ascii_whitespace()).count())
                    }
                    _ => None,
                };
                let verdict = quick_verdict.unwrap_or_else(|| dg.admits(bytes, past_share));
                if !verdict {
                    refused.push(t);
                }
            });
            self.restrict(&mut mask, &refused, GuardRule::Domain);
        }
        if self.stage == Stage::Domain && past_share {
            // The domain has had its share of the budget: no new section, action or literal
            // opens unless the grammar needs one, so the problem keeps room to be written.
            // Blanks and comments are no way around an open the grammar needs: were they all
            // that is left, the answer would pad with them until the cap (SmolLM2 did).
            let mut opens = Vec::new();
            let mut progress = false;
            mask.iter_set_entries(|t| {
                let t = t as u32;
                let flags = self.env.flags(t);
                if flags & OPENS != 0 {
                    opens.push(t);
                } else if flags & BLANKS_ONLY == 0 && self.env.token(t).first() != Some(&b';') {
                    progress = true;
                }
            });
            if progress {
                for t in opens {
                    mask.disallow_token(t);
                }
            }
        }
        if let Some(guarded) = self.guard.as_ref().and_then(|guard| self.guarded(guard, &mask)) {
            self.record_relaxations(&guarded.gave_way);
            if let Some(m) = guarded.mask {
                self.stats.guard_refusals += guarded.refusals as u64;
                mask = m;
            }
        }
        if let Some(budget) = &self.plan_budget {
            let left = self.max_tokens.saturating_sub(self.tokens.len() + 1);
            let place = PlanBudget::place(&self.text);
            let after_blank = self.text.last().is_some_and(u8::is_ascii_whitespace);
            if budget.binds(place, left) {
                let mut refused = Vec::new();
                mask.iter_set_entries(|t| {
                    let t = t as u32;
                    if !self.env.eos().contains(&t) && !budget.admits(place, self.env.token(t), left, after_blank) {
                        refused.push(t);
                    }
                });
                self.restrict(&mut mask, &refused, GuardRule::PlanBudget);
            }
        }
        // Blank runs: only where some token could overrun one, or the blank budget is spent,
        // is the mask walked (per-token leads are precomputed in the environment).
        let tail = Lead::of(self.text.iter().rev().copied());
        let most = self.env.max_lead();
        let blank_budget_spent = self.blank_tokens * BLANK_TOKEN_SHARE >= self.max_tokens;
        let may_overrun = tail.blanks + most.blanks > MAX_BLANK_RUN || tail.newlines + most.newlines > MAX_NEWLINE_RUN;
        if tail.blanks > 0 && may_overrun || blank_budget_spent {
            let mut refused = Vec::new();
            let mut padding = Vec::new();
            let mut other = false;
            mask.iter_set_entries(|t| {
                let t = t as u32;
                let lead = self.env.lead(t);
                let too_long = tail.blanks + lead.blanks > MAX_BLANK_RUN || tail.newlines + lead.newlines > MAX_NEWLINE_RUN;
                let only_blanks = self.env.flags(t) & BLANKS_ONLY != 0;
                if lead.blanks > 0 && tail.blanks > 0 && too_long {
                    refused.push(t);
                } else if lead.blanks > 0 && only_blanks && blank_budget_spent {
                    padding.push(t);
                } else {
                    other = true;
                }
            });
            // The blank budget bounds padding, not the separator the grammar needs (`(:action`
            // must be followed by a blank): where only blanks may come, it gives way.
            if other {
                refused.extend(padding);
            }
            self.restrict(&mut mask, &refused, GuardRule::Blanks);
        }
        self.stats.mask_us += started.elapsed().as_secs_f64() * 1e6;
        self.stats.masks += 1;
        Ok(mask)
    }

    fn forced(&mut self) -> Vec<u32> {
        self.queue.iter().rev().copied().collect()
    }

    fn consume(&mut self, t: u32) -> Result<(), GrammarError> {
        if let Some(&front) = self.queue.last() {
            if front != t {
                return Err(GrammarError::Replay { position: self.tokens.len(), token: t });
            }
            self.queue.pop();
            self.stats.forced += 1;
            self.judge_forced(t);
        }
        self.matcher.consume_token(t).map_err(|e| GrammarError::Mask(e.to_string()))?;
        let bytes = self.env.token(t).to_vec();
        if self.env.flags(t) & BLANKS_ONLY != 0 {
            self.blank_tokens += 1;
        }
        self.tokens.push(t);
        self.text.extend_from_slice(&bytes);
        if let Some(g) = &mut self.guard {
            g.commit_token(&bytes, self.tokens.len());
            if self.stage != Stage::Facts {
                let env = self.env.clone();
                g.measure_name(|b| env.tokenize(b));
            }
        }
        if let Some(g) = self.domain_guard.as_mut().filter(|_| self.stage == Stage::Domain) {
            g.commit(&bytes);
        }
        self.advance_stage(&bytes)?;
        self.refill_forced();
        Ok(())
    }

    fn finished(&self) -> bool {
        self.matcher.is_stopped()
    }

    fn stats(&self) -> ConstraintStats {
        self.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MutexGroup, MutexPart};

    /// The plugin's BlocksWorld predicates.
    const BLOCKSWORLD: &str = "(define (domain bw) (:predicates (clear ?x) (ontable ?x) (handempty) (holding ?x) (on ?x ?y))
        (:action a :parameters (?x) :precondition (clear ?x) :effect (not (clear ?x))))";

    /// The three groups `onebrain_faithful::mutex_groups` proves for the plugin's BlocksWorld:
    /// the arm, each block's support and each block's top.
    fn blocksworld_groups() -> Vec<MutexGroup> {
        let part = |p: &str, params: &[usize], counted: Option<usize>| MutexPart { predicate: p.into(), params: params.to_vec(), counted };
        vec![
            MutexGroup { parts: vec![part("handempty", &[], None), part("holding", &[], Some(0))] },
            MutexGroup { parts: vec![part("holding", &[0], None), part("on", &[0], Some(1)), part("ontable", &[0], None)] },
            MutexGroup { parts: vec![part("clear", &[0], None), part("holding", &[0], None), part("on", &[1], Some(0))] },
        ]
    }

    /// A byte-level problem constraint over BlocksWorld with the init-mutex and goal-at-init
    /// rules on, fed `text` with no mask asked for: [`TokenConstraint::consume`] checks the
    /// grammar only, so this reaches states the guard would have steered clear of.
    fn fed(text: &str) -> Box<dyn TokenConstraint> {
        let spec = ConstraintSpec::Problem {
            domain: BLOCKSWORLD.into(),
            prefix: "(define (problem p) (:domain bw) (:objects ".into(),
            limits: Limits::default(),
            avoid: vec![],
            forbid_goal_at_init: true,
            init_mutex: blocksworld_groups(),
        };
        let mut c = spec.build(&TokenEnv::bytes(), 400).unwrap();
        for b in text.bytes() {
            c.consume(u32::from(b)).unwrap_or_else(|e| panic!("{text:?} at {b:?}: {e}"));
        }
        c
    }

    /// Where every way to finish a fact breaks a mutex group (`(holding ` beside
    /// `(handempty)`), the init-mutex rule gives way for that token alone, with the other
    /// rules holding, and the stats say so; the rule holds again after it.
    #[test]
    fn where_the_mutex_rule_leaves_no_token_it_gives_way_and_says_so() {
        let text = "a b) (:init (handempty) (holding ";
        let mut c = fed(text);
        let mask = c.allowed().unwrap();
        assert!(mask.is_allowed(u32::from(b'a')) && mask.is_allowed(u32::from(b'b')), "the declared objects, as the grammar allows");
        let stats = c.stats();
        assert_eq!(stats.relaxations, vec![Relaxation { position: text.len(), rule: GuardRule::InitMutex }]);
        assert_eq!(stats.guard_overrides, 1);
        for b in "a) (".bytes() {
            c.consume(u32::from(b)).unwrap();
        }
        let mask = c.allowed().unwrap();
        assert!(!mask.is_allowed(u32::from(b'h')), "`(handempty)` would repeat and `(holding` conflict: the rule holds again");
        assert!(mask.is_allowed(u32::from(b'o')), "`(ontable b)` is free");
        assert_eq!(c.stats().guard_overrides, 1);
    }

    /// Regression for the init-mutex campaign's walks that found every token refused: an
    /// empty `:init`, a goal that states `(clear ZbZSi)` and begins `(clear Z` again, where the
    /// grammar allows only `ZbZSi` (forced, a byte at a time) and then its close. The guard's
    /// own rule (no fact twice) leaves nothing, so the whole guard gives way at each of those
    /// tokens and says so, rather than leave no token to sample.
    #[test]
    fn where_the_guards_own_rules_leave_no_token_the_whole_guard_gives_way_and_says_so() {
        let text = "z7 ZbZSi) (:init) (:goal (and (clear ZbZSi) (clear Z";
        let mut c = fed(text);
        assert_eq!(c.forced(), b"bZSi".map(u32::from), "the grammar's one way on");
        for t in c.forced() {
            c.consume(t).unwrap();
        }
        let mask = c.allowed().unwrap();
        assert!(mask.is_allowed(u32::from(b')')), "the repeat may close: nothing else may come");
        let stats = c.stats();
        let everything = [GuardRule::InitMutex, GuardRule::GoalAtInit, GuardRule::Problem];
        for (i, position) in (text.len()..text.len() + 5).enumerate() {
            let here: Vec<GuardRule> = stats.relaxations.iter().filter(|r| r.position == position).map(|r| r.rule).collect();
            assert_eq!(here, everything, "token {i} after the text");
        }
        assert_eq!(stats.guard_overrides, 5);
    }
}

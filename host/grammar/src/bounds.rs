//! Bounds on everything built from a domain: its vocabulary, the grammar's size, llguidance's
//! own work per token, and the guard's tables.
//!
//! A grammar, its parser and the guard grow with the domain they are built from, and a domain
//! file is user input: one with 1,500 types in a chain made [`Vocabulary::subtypes`] quadratic
//! in each of thousands of calls, and a grammar over 300 predicates of arity 8 and 200
//! constants is megabytes of alternatives. So a domain is measured ([`DomainSize`]) before
//! anything is built from it, and one past [`DOMAIN_BOUNDS`] is refused with an error that
//! names the domain, the figure and the limit ([`GrammarError::TooLarge`]). The grammar text
//! is bounded again when it is compiled ([`MAX_GRAMMAR_BYTES`]), and llguidance runs under
//! [`parser_limits`], ours rather than its defaults.
//!
//! Every bound is set far above what real domains need: the largest figure over every
//! PlanBench and Planetarium domain and every bundled plugin's domain is at most a tenth of
//! its bound, and each bound is at least what the `full` mode's domain grammar can write
//! (`host/grammar/tests/bounds.rs` checks both, and docs/reliability.md lists the
//! figures).

use llguidance::api::ParserLimits;

use crate::lark::{Limits, Vocabulary};
use crate::GrammarError;

/// The most a domain may hold for a grammar to be built from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DomainBounds {
    /// Declared types. Real domains: at most 7 (Planetarium's rover); the `full` grammar
    /// writes at most 64.
    pub types: usize,
    /// Declared types on the longest chain of parents. Real: 1; `full`: at most 32.
    pub type_depth: usize,
    /// Declared predicates. Real: at most 25 (rover); `full`: at most 48.
    pub predicates: usize,
    /// Parameters of one predicate. Real: at most 3 (rover); `full`: at most 16.
    pub arity: usize,
    /// Constants. Real: none; `full`: at most 63.
    pub constants: usize,
    /// Action schemas. Real: at most 9 (rover, floor-tile); `full`: at most 32.
    pub actions: usize,
    /// Parameters of one action. Real: at most 6 (rover); `full`: at most 16; grounding
    /// refuses more than 64.
    pub action_params: usize,
    /// Names the guard keeps per problem once its objects are declared: for every predicate
    /// argument, the objects and constants that may fill it, at [`Limits::max_objects`]
    /// objects. Real: at most 2,624 (rover at 64 objects); `full`: at most 97,536.
    pub guard_entries: usize,
}

/// The bounds every grammar is built under.
pub const DOMAIN_BOUNDS: DomainBounds = DomainBounds {
    types: 256,
    type_depth: 64,
    predicates: 256,
    arity: 32,
    constants: 256,
    actions: 128,
    action_params: 64,
    guard_entries: 100_000,
};

/// The longest Lark text a grammar may compile from. The largest built over a real problem is
/// under 2 KB, `full` mode's domain grammar about 3 KB.
pub const MAX_GRAMMAR_BYTES: usize = 512 << 10;

/// llguidance's limits, set here rather than left to its defaults, so that the parser's work
/// per token and its memory are bounded by figures this crate states and tests. The most
/// real grammars use, driven over the reference problems and domains with the byte vocabulary
/// (`tests/bounds.rs`) and with SmolLM2's and Qwen's (`tests/bounds/real_vocab.rs` at the top
/// level), is at most a tenth of each limit.
pub fn parser_limits() -> ParserLimits {
    ParserLimits {
        // Earley items in one row: the grammar's branching at one point. Default 2,000.
        max_items_in_row: 2_000,
        // Work to build the lexer from the grammar's terminals. Default 1,000,000.
        initial_lexer_fuel: 1_000_000,
        // Lexer work for one token mask. Default 200,000.
        step_lexer_fuel: 200_000,
        // Earley items created for one token mask (about 20 per microsecond). Qwen's
        // 151,936-token vocabulary needs up to 20,427 over the reference problems and domains
        // (SmolLM2's 707, the byte vocabulary's 94), so llguidance's default of 50,000 left
        // 2.4 times that; 250,000 leaves 12 and bounds a mask near 12 ms.
        step_max_items: 250_000,
        // Lexer states (about 1-2 KB each): 50,000 caps the lexer near 100 MB, where
        // llguidance's default of 250,000 allows about half a gigabyte.
        max_lexer_states: 50_000,
        // Symbols in the grammar's productions. Default 500,000.
        max_grammar_size: 200_000,
        precompute_large_lexemes: true,
        // The grammar and the tokens so far in every error: kilobytes per error at our sizes.
        verbose_errors: false,
    }
}

/// What a domain holds, in the figures [`DomainBounds`] limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DomainSize {
    /// Declared types.
    pub types: usize,
    /// Types on the longest chain up to `object` (0 when untyped); stops counting past the bound.
    pub type_depth: usize,
    /// Declared predicates.
    pub predicates: usize,
    /// The most parameters of one predicate.
    pub arity: usize,
    /// Constants.
    pub constants: usize,
    /// Action schemas.
    pub actions: usize,
    /// The most parameters of one action.
    pub action_params: usize,
    /// The guard's table at `max_objects` objects: predicate arguments times the names that
    /// may fill each, at most.
    pub guard_entries: usize,
}

impl DomainSize {
    /// The figures of `vocab`, the guard's at `limits.max_objects` objects. Cheap whatever the
    /// domain: the type chain is followed at most [`DomainBounds::type_depth`] + 1 steps.
    pub fn of(vocab: &Vocabulary, limits: &Limits) -> DomainSize {
        let arguments: usize = vocab.predicates.iter().map(|(_, params)| params.len()).sum();
        DomainSize {
            types: vocab.types.len(),
            type_depth: type_depth(vocab, DOMAIN_BOUNDS.type_depth + 1),
            predicates: vocab.predicates.len(),
            arity: vocab.predicates.iter().map(|(_, p)| p.len()).max().unwrap_or(0),
            constants: vocab.constants.len(),
            actions: vocab.actions.len(),
            action_params: vocab.actions.iter().map(|(_, p)| p.len()).max().unwrap_or(0),
            guard_entries: arguments.saturating_mul(vocab.constants.len().saturating_add(limits.max_objects)),
        }
    }

    /// `Ok` when every figure is inside `bounds`, else the first past its bound, naming
    /// `input` (what the domain is, for the error).
    pub fn check(&self, bounds: &DomainBounds, input: &str) -> Result<(), GrammarError> {
        let figures = [
            ("types", self.types, bounds.types),
            ("types in one chain", self.type_depth, bounds.type_depth),
            ("predicates", self.predicates, bounds.predicates),
            ("parameters of one predicate", self.arity, bounds.arity),
            ("constants", self.constants, bounds.constants),
            ("actions", self.actions, bounds.actions),
            ("parameters of one action", self.action_params, bounds.action_params),
            ("names in the guard's table", self.guard_entries, bounds.guard_entries),
        ];
        match figures.into_iter().find(|(_, figure, limit)| figure > limit) {
            Some((what, figure, limit)) => Err(GrammarError::TooLarge { input: input.to_string(), what, figure, limit }),
            None => Ok(()),
        }
    }
}

/// Measures `vocab` and checks it against [`DOMAIN_BOUNDS`]: what every grammar built from a
/// domain goes through first.
pub(crate) fn check_domain(vocab: &Vocabulary, limits: &Limits) -> Result<(), GrammarError> {
    let input = if vocab.name.is_empty() { "the domain".to_string() } else { format!("the domain `{}`", vocab.name) };
    DomainSize::of(vocab, limits).check(&DOMAIN_BOUNDS, &input)
}

/// The longest chain of types from a declared type up through its parents, counting at most
/// `cap` (a cycle, which the verifier reports, counts as `cap`).
fn type_depth(vocab: &Vocabulary, cap: usize) -> usize {
    if vocab.types.len() > DOMAIN_BOUNDS.types {
        // Refused on the count; no need to walk a chain that long.
        return 0;
    }
    // A type's parent when that parent is itself declared (`object` usually is not).
    let declared = |t: &str| vocab.types.iter().any(|(name, _)| name == t);
    let parent = |t: &str| vocab.types.iter().find(|(name, _)| name == t).map(|(_, p)| p.as_str()).filter(|p| declared(p));
    let mut deepest = 0;
    for (name, _) in &vocab.types {
        let mut depth = 1;
        let mut at = name.as_str();
        while depth < cap {
            match parent(at) {
                Some(p) if p != at => {
                    depth += 1;
                    at = p;
                }
                _ => break,
            }
        }
        deepest = deepest.max(depth);
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(text: &str) -> Vocabulary {
        Vocabulary::of(&onebrain_pddl::parse_domain(text).unwrap())
    }

    #[test]
    fn a_chain_of_types_is_measured_to_its_cap() {
        let chain: String = (0..10).map(|i| format!("t{} - t{} ", i + 1, i)).collect();
        let v = vocab(&format!("(define (domain d) (:requirements :typing) (:types t0 - object {chain}) (:predicates (p ?x - t10)))"));
        assert_eq!(type_depth(&v, 100), 11);
        assert_eq!(type_depth(&v, 4), 4);
        let size = DomainSize::of(&v, &Limits::default());
        assert_eq!((size.types, size.predicates, size.arity), (11, 1, 1));
        assert_eq!(size.guard_entries, Limits::default().max_objects);
    }

    #[test]
    fn a_figure_past_its_bound_is_named_with_the_input_and_the_limit() {
        let preds: String = (0..300).map(|i| format!("(p{i} ?a ?b)")).collect();
        let v = vocab(&format!("(define (domain big) (:predicates {preds}))"));
        let e = check_domain(&v, &Limits::default()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("`big`") && text.contains("300 predicates") && text.contains("256"), "{text}");
    }
}

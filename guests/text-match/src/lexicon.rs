//! The lexicon: all the domain knowledge there is. Four domains' wording (PlanBench's
//! templates, configs/*.yaml; Planetarium's), nothing else.

/// Predicates whose name is not the words the texts use (PlanBench's templates,
/// configs/*.yaml; Planetarium's wording). Any other predicate is looked for by the
/// words of its name split at `-` and `_` (`in-city` → "in", "city").
pub(crate) const SYNONYMS: &[(&str, &[&str])] = &[("ontable", &["table"]), ("handempty", &["hand", "empty"])];

/// Predicates worded with their arguments in another order: Planetarium writes
/// `(carry ball1 gripper1)` as "Gripper gripper1 is carrying ball1". Every other
/// predicate names its arguments in PDDL order (all PlanBench templates do).
pub(crate) const ARGUMENT_ORDER: &[(&str, &[usize])] = &[("carry", &[1, 0])];

/// Type predicates named otherwise than their objects' kind: Logistics' `(OBJ p0)`
/// is a package.
pub(crate) const KINDS: &[(&str, &str)] = &[("obj", "package")];

/// PlanBench's `encoded_objects` for BlocksWorld: its PDDL names the red block `a`,
/// the blue one `b`, and so on (configs/blocksworld.yaml).
pub const COLOURS: [&str; 12] =
    ["red", "blue", "orange", "yellow", "white", "magenta", "black", "cyan", "green", "violet", "silver", "gold"];

/// Words that name a kind of object in a spec's object name (`red_block`,
/// `object_a`) and are dropped when matching it.
pub(crate) const KIND_WORDS: &[&str] = &["block", "object", "obj"];

/// Words that precede "block" without naming one ("the block", "another block").
pub(crate) const NOT_NAMES: &[&str] = &[
    "the", "a", "an", "one", "each", "every", "another", "other", "any", "all", "no", "that", "this", "same", "of",
    "top", "first", "second", "third", "last", "which", "some",
];

/// Words that follow "object" without naming one ("the object is", "object of").
pub(crate) const NOT_OBJECT_NAMES: &[&str] = &["the", "is", "in", "on", "and", "of", "that", "which", "to"];

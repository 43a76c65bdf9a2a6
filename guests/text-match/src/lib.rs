//! Reads a task's text back as objects and facts, and a spec's problem against it. No gold
//! PDDL: the only evidence is the statement the model read. Shared by the `text-agreement`
//! reward (which scores the match) and the `text-diagnostics` parser (which tells the
//! Editor what does not match).
//!
//! - [`Text::read`] cuts the text into clauses (sentences cut at commas and at "and", so
//!   one clause is one PlanBench fact), each in the initial or the goal part (from the
//!   first clause that says "goal"), and finds the objects it names ([`Mention`]):
//!   PlanBench's "the red block", "object a", `package_0`, Planetarium's `ball1`.
//! - [`Reading::of`] reads a problem against it:
//!   - an **object** agrees when it names an object the text names, by its own name, by
//!     the words of a split name (`red_block`, `location-0-0`), by the abbreviation
//!     PlanBench's own files use (`p0` for `package_0`, `l1-0` for `location_1_0`: same
//!     first letter, same numbers), or by PlanBench's table of block colours (`a` is the
//!     red block, `b` the blue one, …). Each named object is claimed once: a second spec
//!     object for the same one is invented.
//!   - an **initial fact** agrees when one clause of the text's initial part holds its
//!     predicate's words (or a known synonym: `ontable` is said "on the table",
//!     `handempty` "the hand is empty") and all its arguments, in the order the predicate
//!     is worded (`(on red blue)` is "the red block is on top of the blue block";
//!     `(carry ball1 gripper1)` is "gripper1 is carrying ball1"). A one-place type fact
//!     agrees when its predicate is the object's kind (`(truck t0)` for `truck_0`).
//!   - a **goal fact** agrees the same way, with a clause of the goal part. A goal copied
//!     from the initial state finds no goal clause. A negative goal fact never agrees (no
//!     task of the four domains states one).
//!   - and each clause of the text is **covered** when an agreeing fact of its part states it.
//!
//! Words are lower case, `_` and `-` kept inside names, compared on a crude stem
//! ("blocks" = "block", "carrying" = "carry"). A text that never says "goal" has no parts:
//! any clause may then state either kind of fact. All the domain knowledge is in one table
//! (`lexicon.rs`).
//!
//! ```
//! use onebrain_sdk::pddl;
//! use text_match::{Reading, Text};
//!
//! let text = Text::read("As initial conditions I have that, the red block is clear and the red block \
//!     is on the table.\nMy goal is to have that the red block is on the table.");
//! let problem = pddl::parse_problem("(define (problem p) (:domain bw) (:objects red table)
//!     (:init (clear red) (on red table)) (:goal (ontable red)))").unwrap();
//! let r = Reading::of(&text, &problem);
//! assert!(r.objects[0].mention.is_some() && r.objects[1].mention.is_none()); // `table` is invented
//! assert!(r.init[0].said && !r.init[1].said && r.goal[0].said);
//! ```
//!
//! What it cannot see: facts the text leaves unsaid (Gripper's `(at-robby room1)`) never
//! agree; an abstract text ("gather all balls into one room") names nothing; a fact under a
//! predicate the text words differently from its name and from the synonyms agrees only if
//! the text happens to use the predicate's own words.
#![deny(missing_docs)]

mod lexicon;
#[cfg(feature = "planbench")]
pub mod planbench;
mod reading;
mod text;
mod words;

pub use lexicon::COLOURS;
pub use reading::{alias, claim, cue, states, worded_order, FactReading, ObjectReading, Reading};
pub use text::{Clause, Mention, Text};
pub use words::stem;

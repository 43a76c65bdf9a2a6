//! Object names: how many completions a name has left, how many tokens it takes, and the
//! guard's verdicts for tokens inside `(:objects …)`.

use std::collections::{BTreeSet, HashMap};

use super::scan::parse_objects;
use super::Guard;

/// The characters a name may go on with, up to case (`NAME`: letters, digits, `-`, `_`).
const NAME_CHARS: u128 = 38;

/// How many names a name `rest` characters short of the longest may still become: itself
/// and each of its extensions.
pub(super) fn completions(rest: usize) -> u128 {
    (0..=rest).fold(0u128, |n, k| n.saturating_add(NAME_CHARS.saturating_pow(k as u32)))
}

/// The tokens a name may take: a token per three letters, one per digit or other character
/// (Qwen spends a token on each digit and `_` of `location_0_1`).
pub(super) fn name_tokens(name: &str) -> usize {
    let letters = name.chars().filter(|c| c.is_ascii_alphabetic()).count();
    letters.div_ceil(3) + (name.chars().count() - letters)
}

/// Per prefix of each distinct name, how many of the names start with it.
pub(super) fn prefix_counts<'a>(names: impl Iterator<Item = &'a str>) -> HashMap<String, u128> {
    let distinct: BTreeSet<&str> = names.collect();
    let mut counts = HashMap::new();
    for n in distinct {
        // Names are ASCII by the grammar; a byte the scanner widened is skipped, not split.
        for end in n.char_indices().map(|(i, c)| i + c.len_utf8()) {
            *counts.entry(n[..end].to_string()).or_insert(0) += 1;
        }
    }
    counts
}

/// The guard's verdicts, inside `(:objects …)`, for the tokens that only extend the name being
/// written, end it with blanks, or end it and start another: the same for every such token, so
/// they are computed once per position (see [`Guard::object_names_quick`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NameVerdicts {
    /// A token of name characters may extend (or start) a name.
    pub(crate) extend: bool,
    /// Blanks may end the name being written (it is not a repeat).
    pub(crate) end: bool,
    /// A new name may start after them.
    pub(crate) start: bool,
    /// A token of blanks only may come.
    pub(crate) blank: bool,
}

impl Guard {
    /// True when a name at `word`, with `also` declared besides the names already are, could
    /// neither end nor grow into a name not declared: every completion is taken.
    pub(super) fn exhausted(&self, word: &str, also: &[String]) -> bool {
        if word.is_empty() {
            return false;
        }
        let declared = self.name_prefixes.get(word).copied().unwrap_or(0);
        let besides = also.iter().filter(|a| a.starts_with(word)).count() as u128;
        declared + besides >= completions(crate::lark::MAX_NAME.saturating_sub(word.len()))
    }

    /// [`NameVerdicts`] at the `tokens`-th token, when the answer is inside `(:objects …)`
    /// (anything else gets verdicts that send every token to [`Guard::admits`]).
    pub(crate) fn object_names_quick(&self, tokens: usize) -> Option<NameVerdicts> {
        let top = self.scan.stack.last()?;
        if top.head() != Some(":objects") || self.scan.comment {
            return None;
        }
        let left = self.max_tokens.saturating_sub(tokens);
        let room = left >= self.objects_reserve();
        let w = self.scan.word.as_str();
        let is_name = !w.is_empty() && w != "-" && !top.after_dash;
        let declared = parse_objects(&top.words[1..]);
        let repeat = is_name && declared.iter().any(|(n, _)| n == w);
        // The word after `-` is a type: the grammar bounds it to the declared types and
        // needs it to close the group, and the reserve already holds room for it.
        let type_next = w == "-" || (w.is_empty() && top.after_dash);
        // A new name needs its budget, and the list may hold `max_objects` names in all.
        let start = type_next
            || left >= self.name_start_reserve() && declared.len() + usize::from(is_name) < self.limits.max_objects;
        // A name of characters only may also be the first of a new name, or a type's.
        let extend = match (w.is_empty(), top.after_dash) {
            (true, false) => start,
            (_, true) => true,
            // A repeat may always grow into a new name: that is its way out.
            _ => room || repeat,
        };
        // A blank that ends a word is a separator (a typed group's ` - type` needs two), not
        // padding: the reserves count one after each word.
        Some(NameVerdicts { extend, end: !repeat, start, blank: !w.is_empty() || left >= self.blanks_reserve() })
    }

    /// Object names declared so far, the one being written included.
    pub(super) fn objects_declared(&self) -> usize {
        let Some(top) = self.scan.stack.last().filter(|t| t.head() == Some(":objects")) else { return 0 };
        let w = self.scan.word.as_str();
        parse_objects(&top.words[1..]).len() + usize::from(!w.is_empty() && w != "-" && !top.after_dash)
    }

    /// True when a token of name characters (after optional blanks, which end the name being
    /// written) would leave a name none of whose completions is free: it could neither end
    /// nor grow into a new name.
    pub(crate) fn dead_end(&self, bytes: &[u8]) -> bool {
        let Some(top) = self.scan.stack.last() else { return false };
        if top.after_dash || self.scan.word == "-" {
            return false;
        }
        let lead = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
        let len = if lead > 0 { 0 } else { self.scan.word.len() } + bytes.len() - lead;
        if len < self.shortest_near_dead {
            return false;
        }
        let ended: &[String] = if lead > 0 && !self.scan.word.is_empty() { std::slice::from_ref(&self.scan.word) } else { &[] };
        let mut w = if lead > 0 { String::new() } else { self.scan.word.clone() };
        w.extend(bytes[lead..].iter().map(|b| char::from(b.to_ascii_lowercase())));
        self.exhausted(&w, ended)
    }

    /// Counts, with the model's tokenizer, the tokens of the object name being written, so the
    /// reserves follow names the estimate would undercount (a tokenizer may spend a token on
    /// every character of `gggg…`).
    pub(crate) fn measure_name(&mut self, tokenize: impl Fn(&[u8]) -> Vec<u32>) {
        let in_objects = self.scan.stack.last().is_some_and(|t| t.head() == Some(":objects"));
        let w = &self.scan.word;
        if in_objects && !w.is_empty() && w != "-" {
            let n = tokenize(format!(" {w}").as_bytes()).len();
            self.longest_name_tokens = self.longest_name_tokens.max(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::fixtures::{bw, guard};
    use crate::lark::Limits;

    #[test]
    fn max_objects_bounds_the_whole_list_not_one_typed_group() {
        let limits = Limits { max_objects: 3, ..Limits::default() };
        let g = Guard::new(bw(), limits, 400, b"(define (problem t) (:domain bw) (:objects a b - block c");
        assert!(g.admits(b" - block)", 10));
        assert!(!g.admits(b" - block d", 10), "a fourth name after the type");
        assert!(!g.admits(b" d", 10));
        let q = g.object_names_quick(10).unwrap();
        assert!(!q.start && q.end);
        // Below the bound, names start freely.
        let g = Guard::new(bw(), limits, 400, b"(define (problem t) (:domain bw) (:objects a - block ");
        assert!(g.admits(b"b ", 10));
        assert!(g.object_names_quick(10).unwrap().extend, "a name may start");
    }

    #[test]
    fn a_name_whose_every_completion_is_declared_is_a_dead_end() {
        let stem = "o".repeat(crate::lark::MAX_NAME - 1);
        let tails = "abcdefghijklmnopqrstuvwxyz0123456789_-";
        let all: Vec<String> = std::iter::once(stem.clone()).chain(tails.chars().map(|c| format!("{stem}{c}"))).collect();
        let g = guard(&format!("{} ", all[..all.len() - 1].join(" ")));
        // One completion (`…o-`) is still free: the stem may be written, and grown.
        assert!(!g.dead_end(format!(" {stem}").as_bytes()));
        assert!(g.admits(format!(" {stem}-").as_bytes(), 10));
        let g = guard(&format!("{} ", all.join(" ")));
        assert!(g.dead_end(format!(" {stem}").as_bytes()), "every completion is declared");
        assert!(!g.admits(format!(" {stem}").as_bytes(), 10));
        assert!(g.admits(format!(" {}", &stem[1..]).as_bytes(), 10), "a shorter prefix has room");
        // Case does not make a name new.
        assert!(g.dead_end(format!(" {}", stem.to_uppercase()).as_bytes()));
    }
}

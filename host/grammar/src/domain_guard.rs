//! The domain guard: what the domain grammar of a `full` answer cannot say, checked per token.
//!
//! The domain grammar is context-free, so on its own it lets an answer loop (`(:types def def
//! def …)` until the cap, found on SmolLM2) and lets an action use a predicate it never
//! declared, with any arity, over variables it never took. The guard refuses a token when:
//!
//! - it would complete a name that its list already holds (types, constants, requirements, a
//!   predicate's or an action's parameters), a predicate declared twice, or an action name
//!   used twice;
//! - it would close a literal equal to one its conjunction already holds;
//! - inside an action, it would make a literal's head anything but a prefix of a declared
//!   predicate, a variable anything but a prefix of the action's parameters, a constant
//!   anything but a prefix of a declared constant, or close a literal with the wrong number of
//!   arguments;
//! - the domain has had its share of the token budget and it would start another name in a
//!   list that could be closed instead;
//! - it would open a comment past that share or after [`MAX_COMMENTS`] of them (SmolLM2,
//!   its lists bounded, went on to write empty `;` lines until the cap).
//!
//! A refused name can always grow into another one, so the guard leaves the model a way on,
//! as the problem guard does.

/// Names one list may hold (types, constants, parameters): the reference domains in
/// `../shared/data` and the plugins use at most a dozen.
pub(crate) const MAX_LIST_ITEMS: usize = 24;
/// The longest name (`DNAME`) and variable (`VAR`) the domain grammar allows, in bytes.
const MAX_DNAME: usize = 48;
const MAX_VAR: usize = 40;
/// A name may take one byte per this many tokens the answer has left, but never less than
/// `MIN_NAME_CAP` bytes: every name in `../shared/data` and the plugins fits in 8 up to a
/// few, and a short name only costs the model its spelling.
const TOKENS_PER_NAME_BYTE: usize = 16;
const MIN_NAME_CAP: usize = 8;
/// The longest name (at most `longest` bytes) an answer with `left` tokens may still write.
pub(crate) fn name_cap(left: usize, longest: usize) -> usize {
    (left / TOKENS_PER_NAME_BYTE).clamp(MIN_NAME_CAP, longest)
}

/// Comments a domain may hold: a few explain it, more are a loop.
pub(crate) const MAX_COMMENTS: usize = 8;
/// Comments together may take one byte per this many tokens of the answer's budget. The
/// grammar lets a comment run 200 bytes, 200 tokens of a byte-level answer: a fuzzing walk
/// spent its domain's share on three of them and left its problem no room.
const COMMENT_SHARE: usize = 10;

/// One open list: its words (lower-case) and the literals it holds.
#[derive(Clone, Debug, Default)]
struct Frame {
    words: Vec<String>,
    /// Closed child lists, as normalised text (for the repeated-literal check).
    children: Vec<String>,
    /// Normalised text of the list so far.
    text: String,
    /// In a typed list: the next word is a type.
    after_dash: bool,
}

impl Frame {
    fn head(&self) -> Option<&str> {
        self.words.first().map(String::as_str)
    }
}

/// What kind of words a list holds, from where it sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `:types`, `:constants`, `:requirements`: names, each once (types after `-` exempt).
    Names,
    /// A predicate declaration: its name, then variables, each once.
    Declaration,
    /// An action's `:parameters`: variables, each once.
    Parameters,
    /// The `(:action …)` list itself: its name is new.
    Action,
    /// A precondition or effect expression: `and`, `not`, `=` or a declared predicate.
    Literal,
    /// Anything else (`define`, `domain`, `:predicates`).
    Other,
}

/// The domain guard's verdicts for tokens of name characters and blanks at one position.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Quick {
    /// A word is being written: name characters extend it.
    pub(crate) continuing: bool,
    /// The word being written may end here.
    pub(crate) end: bool,
    /// A new name may start.
    pub(crate) name: bool,
    /// A `-` (a type follows) may start.
    pub(crate) dash: bool,
    /// Bytes the word being written may still gain, and a new word may hold.
    pub(crate) room: usize,
    pub(crate) fresh_room: usize,
}

impl Quick {
    /// The verdict on a token of name characters, optionally after blanks (`lead` of them);
    /// `None` for a token that would bring its word to the longest length allowed, which
    /// only [`DomainGuard::admits`] can judge (the word must then be fit to end).
    pub(crate) fn names(&self, bytes: &[u8], lead: usize) -> Option<bool> {
        let added = bytes.len() - lead;
        let within = |room: usize| match added.cmp(&room) {
            std::cmp::Ordering::Less => Some(true),
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => Some(false),
        };
        if lead == 0 && self.continuing {
            return within(self.room);
        }
        let fresh = if bytes.get(lead) == Some(&b'-') { self.dash } else { self.name };
        if fresh && (lead == 0 || self.end) {
            within(self.fresh_room)
        } else {
            Some(false)
        }
    }
}

/// Why the guard holds what it does: see the module docs.
#[derive(Clone, Debug, Default)]
pub(crate) struct DomainGuard {
    stack: Vec<Frame>,
    /// The word being read, lower-case.
    word: String,
    comment: bool,
    /// Comments opened so far.
    comments: usize,
    /// Declared predicates with their arity.
    predicates: Vec<(String, usize)>,
    constants: Vec<String>,
    actions: Vec<String>,
    /// The parameters of the action being written, once its list closed.
    params: Vec<String>,
    /// Set once the domain's last parenthesis closed: nothing more is checked.
    done: bool,
    /// A copy judging a token: stop at the first refusal.
    asking: bool,
    /// The longest name the answer's budget still allows (0: the grammar's longest).
    name_cap: usize,
    /// Bytes of comment written so far.
    comment_bytes: usize,
    /// Bytes of comment the answer may hold: a tenth of its token budget, set with the first
    /// [`DomainGuard::set_tokens_left`] (0: not set, no bound).
    comment_budget: usize,
}

fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn item_names(words: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut after_dash = false;
    for w in words {
        if w == "-" {
            after_dash = true;
        } else if after_dash {
            after_dash = false;
        } else {
            out.push(w.as_str());
        }
    }
    out
}

impl DomainGuard {
    /// A guard after `prefix` (the primer that opened `(define (domain `).
    pub(crate) fn new(prefix: &[u8]) -> DomainGuard {
        let mut g = DomainGuard::default();
        g.commit(prefix);
        g
    }

    /// Takes in bytes the answer now holds (all of them, even where the guard was overridden).
    pub(crate) fn commit(&mut self, bytes: &[u8]) {
        self.asking = false;
        self.feed_with(bytes, false);
    }

    /// The kind of the list at `depth` in the stack.
    fn kind_at(&self, depth: usize) -> Kind {
        let frame = &self.stack[depth];
        let parent = depth.checked_sub(1).map(|d| &self.stack[d]);
        match frame.head() {
            Some(":types" | ":constants" | ":requirements") => return Kind::Names,
            Some(":action") => return Kind::Action,
            _ => {}
        }
        match parent {
            Some(p) if p.head() == Some(":predicates") => Kind::Declaration,
            Some(p) if p.head() == Some(":action") && p.children.is_empty() && p.words.last().map(String::as_str) == Some(":parameters") => {
                Kind::Parameters
            }
            _ if self.stack[..depth].iter().any(|f| f.head() == Some(":action")) => Kind::Literal,
            _ => Kind::Other,
        }
    }

    /// Whether `word`, complete, may stand as the next word of the top list.
    fn word_ok(&self, word: &str) -> bool {
        let Some(depth) = self.stack.len().checked_sub(1) else { return true };
        let top = &self.stack[depth];
        let kind = self.kind_at(depth);
        match kind {
            // The list's keyword, or a declaration's predicate name.
            Kind::Names if top.words.is_empty() => true,
            Kind::Declaration if top.words.is_empty() => !self.predicates.iter().any(|(p, _)| p == word),
            Kind::Names | Kind::Parameters | Kind::Declaration => {
                if top.after_dash || word == "-" {
                    return true;
                }
                let items = if kind == Kind::Parameters { &top.words[..] } else { &top.words[1..] };
                !item_names(items).contains(&word)
            }
            Kind::Action => !(top.words.len() == 1 && self.actions.iter().any(|a| a == word)),
            Kind::Literal => self.literal_word(depth, word, true),
            Kind::Other => true,
        }
    }

    /// Verdicts shared by every token of names and blanks at this position (outside
    /// literals, whose words are checked against names): see [`Quick`].
    pub(crate) fn quick(&self, past_share: bool) -> Option<Quick> {
        if self.comment && self.comment_spent(1, past_share) && !self.done {
            // Only a newline may come (see `admits`): not a verdict shared by name tokens.
            return None;
        }
        if self.done || self.comment {
            return Some(Quick { continuing: true, end: true, name: true, dash: true, room: usize::MAX, fresh_room: usize::MAX });
        }
        let depth = self.stack.len().checked_sub(1)?;
        if self.kind_at(depth) == Kind::Literal {
            return None;
        }
        Some(Quick {
            room: self.longest(&self.word).saturating_sub(self.word.len()),
            fresh_room: self.longest("?"),
            continuing: !self.word.is_empty(),
            end: self.word.is_empty() || self.word_ok(&self.word),
            name: self.prefix_ok("a", true, past_share),
            dash: self.prefix_ok("-", true, past_share),
        })
    }

    /// Whether `partial` may be the start of the next word of the top list (`fresh`: it is a
    /// new word, not the continuation of one already begun).
    fn prefix_ok(&self, partial: &str, fresh: bool, past_share: bool) -> bool {
        let Some(depth) = self.stack.len().checked_sub(1) else { return true };
        let top = &self.stack[depth];
        let kind = self.kind_at(depth);
        if kind != Kind::Literal && partial.len() > self.longest(partial) {
            return false;
        }
        match kind {
            Kind::Literal => self.literal_word(depth, partial, false),
            Kind::Names | Kind::Declaration | Kind::Parameters if fresh && !top.after_dash => {
                let words = if kind == Kind::Parameters { &top.words[..] } else { top.words.get(1..).unwrap_or(&[]) };
                if partial.starts_with('-') {
                    // A type follows a name: `a b - t`, never `- t - u` nor a list that
                    // starts with one.
                    let n = words.len();
                    n > 0 && words[n - 1] != "-" && (n < 2 || words[n - 2] != "-")
                } else {
                    // Past its share, a domain closes its lists instead of growing them; and
                    // no list needs more than `MAX_LIST_ITEMS` names.
                    let n = item_names(words).len();
                    !(past_share && n > 0 || n >= MAX_LIST_ITEMS)
                }
            }
            _ => true,
        }
    }

    /// A literal's word: its head a declared predicate (or `and`, `not`, `=`), its arguments
    /// the action's parameters or declared constants, no more of them than the arity.
    fn literal_word(&self, depth: usize, w: &str, complete: bool) -> bool {
        let top = &self.stack[depth];
        let fits = |name: &str| if complete { name == w } else { name.starts_with(w) };
        if top.words.is_empty() {
            // `and` only as a whole precondition or effect, `not` only around an atom: the
            // grammar also reads `(not (and))` or `(and (and))` as atoms named `and`, which
            // the verifier refuses (found by fuzzing).
            let parent = depth.checked_sub(1).and_then(|d| self.stack[d].head());
            // A head that takes arguments needs something to fill them: with no parameters
            // and no constants, `(=` or `(on` could only be finished by a name the guard
            // refuses (a fuzzing walk then wrote one anyway, as an override).
            let has_terms = !self.params.is_empty() || !self.constants.is_empty();
            // Equality is a precondition's test; the verifier refuses it in an effect.
            let in_effect = self.stack[..depth]
                .iter()
                .rev()
                .find(|f| f.head() == Some(":action"))
                .and_then(|f| f.words.last())
                .is_some_and(|w| w == ":effect");
            // Whether the conjunction at `at` (if it is one) already holds `text`.
            let holds = |at: Option<usize>, text: String| {
                at.map(|d| &self.stack[d]).is_some_and(|c| c.head() == Some("and") && c.children.contains(&text))
            };
            // A predicate of arity 0 whose literal the conjunction already holds could only
            // close as a repeat, which is refused: a fuzzing walk then padded with blanks
            // until the cap. Under a `not`, the conjunction is one level further up.
            let under_not = parent == Some("not");
            let atom_here = |p: &str, arity: usize| {
                if arity > 0 {
                    return has_terms;
                }
                if under_not {
                    !holds(depth.checked_sub(2), format!("( not ( {p} ) )"))
                } else {
                    !holds(depth.checked_sub(1), format!("( {p} )"))
                }
            };
            // `not` opens only where some atom can still follow it (in this frame's
            // conjunction, one level up), else its `(` would be a dead end the guard could
            // only refuse.
            let not_possible = || {
                self.predicates.is_empty()
                    || (has_terms && !in_effect)
                    || self.predicates.iter().any(|(p, arity)| {
                        if *arity > 0 {
                            has_terms
                        } else {
                            !holds(depth.checked_sub(1), format!("( not ( {p} ) )"))
                        }
                    })
            };
            // `and` only as a whole precondition or effect, `not` only around an atom: the
            // grammar also reads `(not (and))` or `(and (and))` as atoms named `and`, which
            // the verifier refuses (found by fuzzing).
            let keyword_ok = |k: &str| match (k, parent) {
                (_, Some("not")) => false,
                ("and", Some("and")) => false,
                ("not", _) => not_possible(),
                _ => true,
            };
            return ["and", "not"].iter().any(|k| fits(k) && keyword_ok(k))
                || (has_terms && !in_effect && fits("="))
                || self.predicates.iter().any(|(p, arity)| atom_here(p, *arity) && fits(p))
                || self.predicates.is_empty();
        }
        let head = top.words[0].as_str();
        if matches!(head, "and" | "not") {
            // Only lists follow `and` and `not`. The grammar also reads `(not x)` as an atom
            // whose predicate is `not`, which the verifier refuses: the domain then did not
            // parse and the problem lost its guard and budget (a random walk ran into the
            // cap).
            return false;
        }
        let arity = if head == "=" { 2 } else { self.predicates.iter().find(|(p, _)| p == head).map_or(usize::MAX, |(_, a)| *a) };
        if top.words.len() > arity {
            return false;
        }
        if w.starts_with('?') {
            self.params.iter().any(|p| fits(p))
        } else {
            self.constants.iter().any(|c| fits(c))
        }
    }

    /// Whether a token with these bytes may come next. `past_share`: the domain has used its
    /// share of the answer's tokens.
    pub(crate) fn admits(&self, bytes: &[u8], past_share: bool) -> bool {
        if self.comment && !self.done {
            // A comment ends past the domain's share or its own budget: the grammar lets one
            // run 200 bytes, which is 200 tokens of a byte-level answer, and a walk that
            // opened one just before the share left its problem no room (found by fuzzing).
            let before_newline = bytes.iter().position(|&b| b == b'\n').unwrap_or(bytes.len());
            return bytes.contains(&b'\n') || !self.comment_spent(before_newline, past_share);
        }
        if self.done || self.comment {
            return true;
        }
        if bytes.iter().any(|&b| matches!(b, b'(' | b')' | b';')) {
            // Rare at any one position (the grammar allows few such tokens): simulate it.
            return self.clone().feed_checked(bytes, past_share);
        }
        // Names and blanks only: judge the words the token completes and the one it leaves
        // open, without copying the state.
        let mut word = self.word.clone();
        let mut completed: Vec<String> = Vec::new();
        for &b in bytes {
            if is_blank(b) {
                if !word.is_empty() {
                    if !completed.is_empty() {
                        // Two words in one token: rare, simulate.
                        return self.clone().feed_checked(bytes, past_share);
                    }
                    // A word the token began must also have been a fair start.
                    if self.word.is_empty() && !self.prefix_ok(&word, true, past_share) {
                        return false;
                    }
                    if !self.word_ok(&word) {
                        return false;
                    }
                    completed.push(std::mem::take(&mut word));
                }
            } else {
                word.push(char::from(b.to_ascii_lowercase()));
            }
        }
        if word.is_empty() {
            return true;
        }
        if !completed.is_empty() {
            return self.clone().feed_checked(bytes, past_share);
        }
        let fresh = self.word.is_empty() || bytes.first().copied().is_some_and(is_blank);
        self.prefix_ok(&word, fresh, past_share) && self.may_reach(&word)
    }

    /// A word at the grammar's longest name can only end, so it must be fit to end: a
    /// repeated name there left the model no way on (a byte-level rambler wrote the same
    /// 48-character constant four times, each time by a guard override).
    fn may_reach(&self, word: &str) -> bool {
        let literal = self.stack.len().checked_sub(1).is_some_and(|d| self.kind_at(d) == Kind::Literal);
        let longest = if literal { self.grammar_longest(word) } else { self.longest(word) };
        word.len() < longest || self.word_ok(word)
    }

    /// The grammar's longest word of this shape: keywords are the grammar's own.
    fn grammar_longest(&self, word: &str) -> usize {
        match word.as_bytes().first() {
            Some(b':') => usize::MAX,
            Some(b'?') => MAX_VAR,
            _ => MAX_DNAME,
        }
    }

    /// The longest word of this shape the answer may write now: the grammar's, or less once
    /// the budget runs low, so that a long name cannot eat the problem's tokens. (A literal
    /// names declared words, whatever their length.)
    fn longest(&self, word: &str) -> usize {
        let g = self.grammar_longest(word);
        if self.name_cap == 0 || word.starts_with(':') {
            g
        } else {
            g.min(self.name_cap)
        }
    }

    /// Tells the guard how many tokens the answer has left: names are held to
    /// `left / TOKENS_PER_NAME_BYTE` bytes (at least [`MIN_NAME_CAP`]), counted as if each
    /// byte were a token, the worst a tokenizer does (SmolLM2 spelt names a byte a token).
    pub(crate) fn set_tokens_left(&mut self, left: usize) {
        self.name_cap = name_cap(left, MAX_DNAME);
        if self.comment_budget == 0 {
            self.comment_budget = (left / COMMENT_SHARE).max(1);
        }
    }

    /// Whether the comment being written has used up what comments may take: the domain's
    /// share, or the comments' own budget. Only a newline may come then.
    fn comment_spent(&self, bytes: usize, past_share: bool) -> bool {
        past_share || (self.comment_budget > 0 && self.comment_bytes + bytes > self.comment_budget)
    }

    fn feed_checked(&mut self, bytes: &[u8], past_share: bool) -> bool {
        self.asking = true;
        if !self.feed_with(bytes, past_share) {
            return false;
        }
        if self.done || self.comment {
            return true;
        }
        if self.word.is_empty() {
            // A literal just opened must be able to take a head, or its `(` is a dead end.
            return match self.stack.len().checked_sub(1) {
                Some(d) if self.kind_at(d) == Kind::Literal && self.stack[d].words.is_empty() && self.stack[d].children.is_empty() => {
                    self.literal_word(d, "", false)
                }
                _ => true,
            };
        }
        // The open word began in this token unless the token only extended it.
        let fresh = self.word.len() <= bytes.len();
        self.prefix_ok(&self.word, fresh, past_share) && self.may_reach(&self.word)
    }

    /// Reads `bytes`, always advancing the state; false when the guard refuses something in
    /// them (the caller stops at the first refusal when it only asks).
    fn feed_with(&mut self, bytes: &[u8], past_share: bool) -> bool {
        let mut ok = true;
        for &b in bytes {
            if self.done {
                break;
            }
            if self.comment {
                self.comment = b != b'\n';
                self.comment_bytes += usize::from(self.comment);
                continue;
            }
            ok &= match b {
                b';' => {
                    let ended = self.end_word();
                    self.comments += 1;
                    self.comment = true;
                    ended && self.comments <= MAX_COMMENTS && !self.comment_spent(1, past_share)
                }
                b'(' => {
                    let ended = self.end_word();
                    self.stack.push(Frame::default());
                    ended
                }
                b')' => self.end_word() & self.close(),
                _ if is_blank(b) => self.end_word(),
                _ => {
                    let starts = self.word.is_empty();
                    self.word.push(char::from(b.to_ascii_lowercase()));
                    !starts || self.prefix_ok(&self.word, true, past_share)
                }
            };
            if !ok && self.asking {
                return false;
            }
        }
        ok
    }

    /// Ends the word being read; false when it may not stand where it is.
    fn end_word(&mut self) -> bool {
        if self.word.is_empty() {
            return true;
        }
        let w = std::mem::take(&mut self.word);
        let ok = self.word_ok(&w);
        let Some(top) = self.stack.last_mut() else { return ok };
        top.after_dash = w == "-";
        if !top.text.is_empty() {
            top.text.push(' ');
        }
        top.text.push_str(&w);
        top.words.push(w);
        ok
    }

    /// Closes the innermost list; false for a literal of the wrong arity or a repeated one.
    fn close(&mut self) -> bool {
        let Some(depth) = self.stack.len().checked_sub(1) else { return true };
        let kind = self.kind_at(depth);
        let f = self.stack.pop().expect("checked above");
        let mut ok = true;
        match kind {
            Kind::Literal => {
                let head = f.head().unwrap_or("and");
                if head == "not" {
                    // `(not)` reads as an atom to the grammar; the verifier wants one literal.
                    ok = f.children.len() == 1;
                } else if head != "and" {
                    let declared = self.predicates.iter().find(|(p, _)| p == head).map(|(_, a)| *a);
                    let arity = if head == "=" { Some(2) } else { declared };
                    ok = arity.is_none_or(|a| f.words.len() - 1 == a);
                }
            }
            Kind::Declaration => {
                if let Some(name) = f.head() {
                    let arity = item_names(&f.words[1..]).len();
                    self.predicates.push((name.to_string(), arity));
                }
            }
            Kind::Parameters => self.params = item_names(&f.words).into_iter().map(str::to_string).collect(),
            Kind::Names if f.head() == Some(":constants") => {
                self.constants = item_names(&f.words[1..]).into_iter().map(str::to_string).collect()
            }
            Kind::Action => {
                if let Some(name) = f.words.get(1) {
                    self.actions.push(name.clone());
                }
                self.params.clear();
            }
            _ => {}
        }
        let text = format!("( {} )", f.text);
        let Some(parent) = self.stack.last_mut() else {
            self.done = true;
            return ok;
        };
        if parent.head() == Some("and") && parent.children.contains(&text) {
            ok = false;
        }
        if !parent.text.is_empty() {
            parent.text.push(' ');
        }
        parent.text.push_str(&text);
        parent.children.push(text);
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(text: &str) -> DomainGuard {
        DomainGuard::new(format!("(define (domain d) {text}").as_bytes())
    }

    #[test]
    fn a_name_list_may_not_repeat_a_name() {
        let g = guard("(:types block def");
        assert!(g.admits(b" ", false), "the first `def`");
        let g = guard("(:types def ");
        assert!(g.admits(b"de", false), "a prefix of a repeat may still grow");
        assert!(!g.admits(b"def ", false));
        assert!(!g.admits(b"def)", false));
        assert!(g.admits(b"defs ", false));
        // A type after `-` may repeat.
        let g = guard("(:types a - thing b - ");
        assert!(g.admits(b"thing)", false));
        // Past the domain's share, the list closes instead of growing.
        let g = guard("(:types a ");
        assert!(!g.admits(b"b", true));
        assert!(g.admits(b")", true));
    }

    #[test]
    fn a_type_follows_a_name_and_full_lists_close() {
        let g = guard("(:predicates (p ?x - t ");
        assert!(!g.admits(b"- ", false), "`- t - u`");
        assert!(g.admits(b"?y ", false));
        let g = guard("(:types ");
        assert!(!g.admits(b"-", false), "a list starting with a type");
        let q = g.quick(false).unwrap();
        assert_eq!((q.names(b"-", 0), q.names(b"a", 0)), (Some(false), Some(true)));
        // Past the share, a declaration keeps the one variable it has.
        let g = guard("(:predicates (p ?x ");
        assert!(!g.admits(b"?y", true));
        assert!(!g.admits(b" ?y", true));
        assert!(g.admits(b")", true));
    }

    /// Regression (found by fuzzing): a comment opened before the share ran on past it.
    #[test]
    fn a_comment_ends_once_the_domain_has_had_its_share() {
        let g = guard("(:predicates (p)) ; a comment (");
        assert!(g.admits(b"xyz", false), "inside the share a comment goes on");
        assert!(!g.admits(b"xyz", true), "past it only a newline may come");
        assert!(g.quick(true).is_none(), "no shared verdict for names inside it");
        assert!(g.admits(b"\n", true));
        assert!(g.admits(b" .\n  ", true));
        // Comments together take at most a tenth of the budget (here 100 tokens: 10 bytes).
        let mut g = guard("(:predicates (p)) ; ab");
        g.set_tokens_left(100);
        assert!(g.admits(b"cdefghi", false));
        assert!(!g.admits(b"cdefghijkl", false), "past the comments' budget");
        assert!(g.admits(b"cdefghijkl\n", false));
        let mut g = guard("(:predicates (p)) ; abcdefghij\n");
        g.set_tokens_left(100);
        assert!(!g.admits(b";", false), "no comment opens once the budget is spent");
    }

    #[test]
    fn comments_are_bounded() {
        let g = guard("(:types a ");
        assert!(g.admits(b"; why\n", false));
        assert!(!g.admits(b";", true), "past the share");
        let g = guard(&format!("(:types a {}", ";\n".repeat(MAX_COMMENTS)));
        assert!(!g.admits(b";", false));
        assert!(!g.admits(b");", false));
        assert!(g.admits(b")", false));
    }

    #[test]
    fn declarations_and_actions_are_unique() {
        let g = guard("(:predicates (on ?x ?y) (");
        assert!(!g.admits(b"on ", false));
        assert!(g.admits(b"clear ", false));
        let g = guard("(:predicates (on ?x ");
        assert!(!g.admits(b"?x)", false));
        let g = guard("(:predicates (p ?x)) (:action a :parameters (?x) :precondition (p ?x) :effect (p ?x)) (:action ");
        assert!(!g.admits(b"a ", false));
        assert!(g.admits(b"b ", false));
    }

    #[test]
    fn action_literals_use_the_declarations() {
        let pre = "(:constants k) (:predicates (on ?x ?y) (clear ?x)) (:action a :parameters (?x ?y) :precondition (and ";
        let g = guard(pre);
        assert!(g.admits(b"(on ?x ?y)", false));
        assert!(g.admits(b"(cl", false));
        assert!(!g.admits(b"(holding ", false), "undeclared predicate");
        assert!(!g.admits(b"(on ?x)", false), "arity");
        assert!(!g.admits(b"(on ?x ?y ?x", false), "arity");
        assert!(!g.admits(b"(on ?z", false), "not a parameter");
        assert!(g.admits(b"(on k ?x)", false), "a constant");
        assert!(!g.admits(b"(on j ?x)", false), "not a constant");
        let g = guard(&format!("{pre}(clear ?x) "));
        assert!(!g.admits(b"(clear ?x)", false), "a repeated literal");
        assert!(g.admits(b"(not (clear ?x))", false));
        // Regression (a fuzzing walk): an action with no parameters, in a domain
        // with no constants, cannot fill `=` or `on`; it may still use a predicate of arity 0.
        let g = guard("(:predicates (on ?x ?y) (free)) (:action a :parameters () :precondition (and ");
        assert!(!g.admits(b"(= ", false));
        assert!(!g.admits(b"(on ", false));
        assert!(g.admits(b"(free)", false));
        assert!(g.admits(b"(not (free))", false));
        let g = guard(pre);
        // Regression (a fuzzing walk): the grammar also reads `(not x)` and `(not)`
        // as atoms of a predicate `not`; the verifier refuses both, and the problem lost its
        // guard with the domain.
        assert!(!g.admits(b"(not ?x", false));
        assert!(!g.admits(b"(not k", false));
        assert!(!g.admits(b"(not)", false));
        assert!(!g.admits(b"(and ?x", false));
        assert!(g.admits(b"(not (on ?x ?y))", false));
        assert!(!g.admits(b"(not (and", false));
        assert!(!g.admits(b"(not (not", false));
        assert!(!g.admits(b"(and", false), "a conjunction inside a conjunction");
        // A literal of arity 0 already in the conjunction cannot open again (nor its negation).
        let g = guard("(:predicates (free) (freed)) (:action a :parameters () :precondition (and (free) (not (freed)) ");
        assert!(!g.admits(b"(free)", false));
        assert!(!g.admits(b"(free ", false));
        assert!(g.admits(b"(free", false), "`freed` is still open");
        assert!(g.admits(b"(freed)", false));
        assert!(!g.admits(b"(not (freed ", false));
        assert!(g.admits(b"(not (free))", false));
        let effect = "(:predicates (on ?x ?y)) (:action a :parameters (?x ?y) :precondition (= ?x ?y) :effect (and ";
        assert!(!guard(effect).admits(b"(= ", false), "no equality in an effect");
        assert!(!guard(effect).admits(b"(not (= ", false));
        assert!(guard(effect).admits(b"(not (on ?x ?y))", false));
        // Under `not`, once every atom is taken, neither `(` nor `not` may open.
        let g = guard("(:predicates (free)) (:action a :parameters () :precondition (and (not (free)) ");
        assert!(!g.admits(b"(not (", false));
        assert!(!g.admits(b"(not", false));
        assert!(g.admits(b"(free)", false));
        let g = guard(&format!("{effect}(not (on ?x ?y)) (not( \n\t"));
        assert!(!g.admits(b"=", false), "no equality in an effect, after blanks either");
        assert!(!g.admits(b"= ", false));
        let g = guard(&format!("{pre}(not "));
        assert!(g.admits(b"(on ?x ?y))", false));
        assert!(!g.admits(b"(and)", false));
        // The byte-at-a-time path agrees with the whole-token path.
        let g = guard(&format!("{pre}(on ?x"));
        assert!(!g.admits(b")", false));
        assert!(g.admits(b" ", false));
        let g = guard(&format!("{pre}(on ?"));
        assert!(g.admits(b"y", false));
        assert!(!g.admits(b"z", false));
    }
}

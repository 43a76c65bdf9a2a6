//! The guard's byte scanner over S-expressions, and what it reports: sections, facts and
//! object names.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Section {
    Init,
    Goal,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Frame {
    /// Words read in this list, lower-case, its head first.
    pub(super) words: Vec<String>,
    /// The same words as written.
    raw_words: Vec<String>,
    /// In `:objects`: the next word is a type.
    pub(super) after_dash: bool,
    /// The answer's token the list opened at, where known (not in the prompt's primer or a
    /// replay): a list whose token is the one being judged was opened by it.
    pub(super) opened_at: Option<usize>,
}

impl Frame {
    pub(super) fn head(&self) -> Option<&str> {
        self.words.first().map(String::as_str)
    }
}

/// What the scanner saw in the bytes it was fed.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Event {
    /// An object name was declared; `repeat` when the list already had it.
    Name { repeat: bool },
    /// `(:objects …)` closed: the declared (name, type) pairs, lower-case, and with the names
    /// as written.
    ObjectsClosed(Vec<(String, String)>, Vec<(String, String)>),
    /// A fact closed in a section, the token its list (`(not …)`'s when negated) opened at, and
    /// whether it is the goal's whole body (`(:goal (on a b))`, no `and`).
    Fact(Fact, Option<usize>, bool),
    /// The goal's body closed: the problem says everything it will.
    GoalClosed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Fact {
    pub(super) section: Section,
    pub(super) positive: bool,
    /// Predicate, then arguments.
    pub(super) words: Vec<String>,
}

/// A byte scanner over S-expressions: open lists, the word being read, `;` comments.
#[derive(Clone, Debug, Default)]
pub(super) struct Scan {
    pub(super) stack: Vec<Frame>,
    pub(super) word: String,
    /// The word being read, as written.
    pub(super) raw: String,
    pub(super) comment: bool,
    /// Object names begun so far (counted at their first character).
    pub(super) names_started: usize,
    /// The answer's token being fed, where known (not for the prompt's primer or a replay).
    pub(super) position: Option<usize>,
}

pub(super) fn section_of(frames: &[Frame]) -> Option<Section> {
    frames.iter().find_map(|f| match f.head() {
        Some(":init") => Some(Section::Init),
        Some(":goal") => Some(Section::Goal),
        _ => None,
    })
}

/// Whether a fact whose enclosing lists are `frames` (innermost last; its `(not …)` among them
/// when `negated`) is the goal's whole body, `(:goal (on a b))` with no `and`: the goal closes
/// with it, so it is the goal's last fact.
pub(super) fn is_goal_body(frames: &[Frame], negated: bool) -> bool {
    let holder = frames.len().checked_sub(1 + usize::from(negated)).and_then(|i| frames[i].head());
    holder == Some(":goal")
}

pub(super) fn parse_objects(words: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if w == "-" {
            let ty = it.next().cloned().unwrap_or_else(|| onebrain_pddl::OBJECT.to_string());
            out.extend(pending.drain(..).map(|n| (n, ty.clone())));
        } else {
            pending.push(w.clone());
        }
    }
    out.extend(pending.into_iter().map(|n| (n, onebrain_pddl::OBJECT.to_string())));
    out
}

impl Scan {
    pub(super) fn feed(&mut self, bytes: &[u8], out: &mut Vec<Event>) {
        for &b in bytes {
            if self.comment {
                self.comment = b != b'\n';
                continue;
            }
            match b {
                b';' => {
                    self.end_word(out);
                    self.comment = true;
                }
                b'(' => {
                    self.end_word(out);
                    self.stack.push(Frame { opened_at: self.position, ..Frame::default() });
                }
                b')' => {
                    self.end_word(out);
                    if let Some(f) = self.stack.pop() {
                        self.close(f, out);
                    }
                }
                b' ' | b'\t' | b'\r' | b'\n' => self.end_word(out),
                _ => {
                    if self.word.is_empty() && self.stack.last().and_then(Frame::head) == Some(":objects") {
                        self.names_started += 1;
                    }
                    self.word.push(char::from(b.to_ascii_lowercase()));
                    self.raw.push(char::from(b));
                }
            }
        }
    }

    fn end_word(&mut self, out: &mut Vec<Event>) {
        if self.word.is_empty() {
            return;
        }
        let w = std::mem::take(&mut self.word);
        let raw = std::mem::take(&mut self.raw);
        let Some(top) = self.stack.last_mut() else { return };
        if top.head() == Some(":objects") {
            if w == "-" {
                top.after_dash = true;
            } else if top.after_dash {
                top.after_dash = false;
            } else {
                let names = parse_objects(&top.words[1..]);
                out.push(Event::Name { repeat: names.iter().any(|(n, _)| *n == w) });
            }
        }
        top.words.push(w);
        top.raw_words.push(raw);
    }

    fn close(&mut self, f: Frame, out: &mut Vec<Event>) {
        let body_of_goal = self.stack.last().and_then(Frame::head) == Some(":goal");
        match f.head() {
            Some(":objects") => {
                let raw: Vec<(String, String)> = parse_objects(&f.raw_words[1..])
                    .into_iter()
                    .map(|(n, t)| (n, t.to_ascii_lowercase()))
                    .collect();
                out.push(Event::ObjectsClosed(parse_objects(&f.words[1..]), raw))
            }
            Some("and") | Some("not") | None => {}
            Some(h) if h.starts_with(':') => {}
            Some(_) => {
                if let Some(section) = section_of(&self.stack) {
                    let not = self.stack.last().filter(|p| p.head() == Some("not"));
                    let opened_at = not.map_or(f.opened_at, |n| n.opened_at);
                    let whole_goal = is_goal_body(&self.stack, not.is_some());
                    out.push(Event::Fact(Fact { section, positive: not.is_none(), words: f.words }, opened_at, whole_goal));
                }
            }
        }
        if body_of_goal {
            out.push(Event::GoalClosed);
        }
    }
}

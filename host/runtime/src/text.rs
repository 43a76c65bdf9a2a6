//! Plugin text made safe to print and to store: control characters escaped,
//! length capped.
//!
//! Everything a plugin says (its error messages, its stderr, the strings it
//! returns, its manifest) can reach a terminal or a log. An ANSI escape
//! sequence there rewrites the screen (erases a "FAILED" line, prints a
//! forged "ok", retitles the window), and a bidirectional override reorders
//! what is shown. So control characters are written out as visible escapes
//! (`\u{1b}`), and the text is printed as data.

use std::borrow::Cow;
use std::path::Path;

/// Whether `c` must not reach a terminal as is: C0 and C1 controls, DEL,
/// and the Unicode bidirectional overrides and isolates ("Trojan Source").
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape_with(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if !is_unsafe(c) || keep(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// `s` as one line of data: every control character (newlines included) and
/// every bidirectional override is written as a visible escape such as
/// `\n` or `\u{1b}`. Text without them is returned as is.
///
/// ```
/// assert_eq!(onebrain_runtime::escape_line("ok\x1b[2K\nFAILED"), "ok\\u{1b}[2K\\nFAILED");
/// assert_eq!(onebrain_runtime::escape_line("plain"), "plain");
/// ```
pub fn escape_line(s: &str) -> Cow<'_, str> {
    escape_with(s, |_| false)
}

/// `s` as a block of text (PDDL, a task statement): newlines and tabs stay,
/// `\r\n` becomes `\n`, every other control character is escaped as in
/// [`escape_line`].
pub fn escape_text(s: &str) -> Cow<'_, str> {
    let s: Cow<'_, str> = if s.contains("\r\n") { Cow::Owned(s.replace("\r\n", "\n")) } else { Cow::Borrowed(s) };
    match escape_with(&s, |c| c == '\n' || c == '\t') {
        Cow::Borrowed(_) => s,
        Cow::Owned(o) => Cow::Owned(o),
    }
}

/// A path (a plugin folder's name is chosen by whoever installed it) as one
/// line of data.
pub fn escape_path(p: &Path) -> String {
    escape_line(&p.display().to_string()).into_owned()
}

/// A message from a plugin, ready to print or store: escaped as one line
/// and capped at `cap` bytes (plus a short note of the full length).
pub(crate) fn message(s: &str, cap: usize) -> String {
    // Only the head is escaped: a message far over the cap is never copied whole.
    let head = &s[..floor_boundary(s, cap)];
    let mut out = escape_line(head).into_owned();
    let escaped_len = out.len();
    out.truncate(floor_boundary(&out, cap));
    if head.len() < s.len() || out.len() < escaped_len {
        out.push_str(&format!("… [{} bytes in all]", s.len()));
    }
    out
}

fn floor_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Whether `s` is a plugin identity: 1 to 64 ASCII letters, digits, `-` or `_`.
pub(crate) fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_ansi_newlines_and_bidi_overrides() {
        let forged = "\x1b[1A\x1b[2Kpaper-rewards 0.1.0 (reward): ok\x1b]0;owned\x07";
        let shown = escape_line(forged);
        assert!(!shown.chars().any(is_unsafe), "{shown}");
        assert_eq!(shown, "\\u{1b}[1A\\u{1b}[2Kpaper-rewards 0.1.0 (reward): ok\\u{1b}]0;owned\\u{7}");
        assert_eq!(escape_line("a\nb\r\tc\u{9b}d"), "a\\nb\\r\\tc\\u{9b}d");
        assert_eq!(escape_line("abc\u{202e}fed"), "abc\\u{202e}fed");
        // Escaping is idempotent: escaped text has no control characters left.
        assert_eq!(escape_line(&shown), shown);
        // Ordinary Unicode is data, not a control.
        assert_eq!(escape_line("s_J ≥ τ, 积木"), "s_J ≥ τ, 积木");
    }

    #[test]
    fn text_keeps_lines_and_tabs_only() {
        assert_eq!(escape_text("(define\r\n\t(domain d))\n"), "(define\n\t(domain d))\n");
        assert_eq!(escape_text("a\rb\x1b[31m"), "a\\rb\\u{1b}[31m");
    }

    #[test]
    fn messages_are_escaped_and_capped() {
        let huge = "e".repeat(1 << 20);
        let m = message(&huge, 100);
        assert!(m.starts_with(&"e".repeat(100)) && m.len() < 200, "{m}");
        assert!(m.ends_with("… [1048576 bytes in all]"), "{m}");
        // Escaping cannot push a message past its cap.
        let m = message(&"\x1b".repeat(1000), 100);
        assert!(m.len() < 150 && !m.contains('\x1b'), "{m}");
        assert_eq!(message("short", 100), "short");
        // A cut never splits a character.
        assert!(message(&"é".repeat(100), 51).starts_with(&"é".repeat(25)));
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("mystery-blocksworld") && is_identifier("flat_reward"));
        for bad in ["", "a b", "../x", "x\x1b", &"x".repeat(65)] {
            assert!(!is_identifier(bad), "{bad:?}");
        }
    }
}

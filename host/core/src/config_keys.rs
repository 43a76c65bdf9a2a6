//! Config errors that point at the key a user meant.
//!
//! Every config section refuses unknown keys (`deny_unknown_fields`), and serde's message
//! for one lists every key the section takes. [`suggest_near_key`] adds the one the unknown
//! key most likely misspells: `lora_rnak` → `lora-rank`, `inflight` → `in-flight`.

/// `message` (a TOML or JSON parse error's text), followed by `did you mean `…`?` when it
/// reports an unknown key and one of the keys it lists is near it. Any other message comes
/// back unchanged.
pub fn suggest_near_key(message: &str) -> String {
    match near_key(message) {
        Some(key) => format!("{}\ndid you mean `{key}`?", message.trim_end()),
        None => message.to_string(),
    }
}

/// The listed key nearest to the unknown one, if it is near enough to be a misspelling.
fn near_key(message: &str) -> Option<&str> {
    let (_, rest) = message.split_once("unknown field `")?;
    let (unknown, rest) = rest.split_once('`')?;
    let (_, listed) = rest.split_once("expected")?;
    let wanted = normalize(unknown);
    listed
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|key| (strsim::levenshtein(&wanted, &normalize(key)), key))
        // A third of the key's length, at least 2 edits: catches slips, not other words.
        .filter(|&(d, key)| d <= (key.len() / 3).max(2))
        .min_by_key(|&(d, _)| d)
        .map(|(_, key)| key)
}

/// Case and separator differences are not misspellings: `memory_budget_mb`, `Memory-Budget-MB`
/// and `memory-budget-mb` are one key.
fn normalize(key: &str) -> String {
    key.chars().map(|c| if c == '_' { '-' } else { c.to_ascii_lowercase() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTED: &str = "expected one of `path`, `role-tokens`, `lora-rank`, `memory-budget-mb`";

    #[test]
    fn a_misspelt_key_gets_its_near_match() {
        let msg = format!("TOML parse error at line 2\nunknown field `lora_rnak`, {LISTED}\n");
        assert_eq!(suggest_near_key(&msg), format!("{}\ndid you mean `lora-rank`?", msg.trim_end()));
        let msg = format!("unknown field `memory_budget_mb`, {LISTED}");
        assert!(suggest_near_key(&msg).ends_with("did you mean `memory-budget-mb`?"));
    }

    #[test]
    fn a_key_far_from_every_listed_one_gets_no_guess() {
        let msg = format!("unknown field `temperature`, {LISTED}");
        assert_eq!(suggest_near_key(&msg), msg);
        assert_eq!(suggest_near_key("invalid type: string, expected usize"), "invalid type: string, expected usize");
    }

    #[test]
    fn serde_two_key_lists_are_read_too() {
        let msg = "unknown field `tmeout-ms`, expected `timeout-ms` or `memory-mb`";
        assert!(suggest_near_key(msg).ends_with("did you mean `timeout-ms`?"));
    }
}

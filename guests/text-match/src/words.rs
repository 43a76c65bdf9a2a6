//! Words: how a text and a name are cut and compared.

/// The words of `s`: lower case, `_` and `-` kept inside a word (`location_0_0`).
pub(crate) fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .map(|w| w.trim_matches(|c| c == '-' || c == '_').to_ascii_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// A crude stem, enough for the four domains' wording: "blocks" → "block",
/// "cities" → "city", "carrying" → "carry", "craves" → "crave". Names (anything
/// with a digit, `_` or `-`) and short words are kept as they are.
pub fn stem(w: &str) -> String {
    if w.len() <= 3 || !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return w.to_string();
    }
    if let Some(s) = w.strip_suffix("ies") {
        return format!("{s}y");
    }
    if let Some(s) = w.strip_suffix("ing") {
        if s.len() >= 3 {
            return s.to_string();
        }
    }
    if w.ends_with('s') && !w.ends_with("ss") {
        return w[..w.len() - 1].to_string();
    }
    w.to_string()
}

/// The letters a name starts with: `location_0_0` → `location`, `ball1` → `ball`.
pub(crate) fn kind_of(name: &str) -> String {
    name.chars().take_while(|c| c.is_ascii_alphabetic()).collect()
}

/// A name with numbers as (first letter, numbers): `p0` and `package_0` are both
/// (`p`, [0]); `l1-0` and `location_1_0` both (`l`, [1, 0]). `None` without a digit.
pub(crate) fn abbreviation(name: &str) -> Option<(char, Vec<u64>)> {
    let first = name.chars().next().filter(char::is_ascii_alphabetic)?;
    let numbers: Vec<u64> = name
        .split(|c: char| !c.is_ascii_digit())
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().unwrap_or(u64::MAX))
        .collect();
    (!numbers.is_empty()).then_some((first, numbers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_and_names() {
        assert_eq!(words("The red_block, location-0-0."), ["the", "red_block", "location-0-0"]);
        assert_eq!([stem("blocks"), stem("cities"), stem("carrying"), stem("ball1")], ["block", "city", "carry", "ball1"]);
        assert_eq!(abbreviation("p0"), abbreviation("package_0"));
        assert_eq!(abbreviation("l1-0"), abbreviation("location_1_0"));
        assert_eq!(abbreviation("red"), None);
        assert_eq!(kind_of("location_0_0"), "location");
    }
}

//! NATURAL PLAN (Zheng et al., 2024), Trip Planning and Calendar Scheduling, read from the
//! benchmark's official JSON files (one object keyed by example id) and scored as its
//! published evaluation scores them: exact match of the parsed plan.

use std::path::Path;

use serde_json::Value;

use crate::TransferError;

/// A Trip Planning example.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TripExample {
    /// The example's key in the file.
    pub id: String,
    /// The task without worked examples.
    pub prompt_0shot: String,
    /// The task after five worked examples: the benchmark's default.
    pub prompt_5shot: String,
    /// The reference answer.
    pub golden_plan: String,
    /// The stays in order: (city, days), from the `cities` and `durations` fields.
    pub stays: Vec<(String, u32)>,
}

/// A meeting time: the weekday and the start and end in minutes after midnight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeetingTime {
    /// `Monday` … `Sunday`, as written.
    pub day: String,
    /// Start, minutes after midnight.
    pub start: u32,
    /// End, minutes after midnight.
    pub end: u32,
}

/// A Calendar Scheduling example.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalendarExample {
    /// The example's key in the file.
    pub id: String,
    /// The task without worked examples.
    pub prompt_0shot: String,
    /// The task after five worked examples: the benchmark's default.
    pub prompt_5shot: String,
    /// The reference answer.
    pub golden_plan: String,
    /// How many people must meet.
    pub num_people: u32,
    /// Over how many days.
    pub num_days: u32,
    /// The golden meeting time, parsed from `golden_plan`.
    pub golden: MeetingTime,
}

/// The examples of an official file, in the file's key order, each with its id.
fn examples(path: &Path) -> Result<Vec<(String, serde_json::Map<String, Value>)>, TransferError> {
    let text = std::fs::read_to_string(path).map_err(|source| TransferError::Io { path: path.into(), source })?;
    let bad = |row: &str, message: String| TransferError::Format { path: path.into(), row: row.into(), message };
    let value: Value = serde_json::from_str(&text).map_err(|e| bad("file", e.to_string()))?;
    let Value::Object(map) = value else {
        return Err(bad("file", "expected one object keyed by example id".into()));
    };
    map.into_iter()
        .map(|(id, v)| match v {
            Value::Object(fields) => Ok((id, fields)),
            _ => Err(bad(&id, "expected an object".into())),
        })
        .collect()
}

fn text_field(path: &Path, id: &str, fields: &serde_json::Map<String, Value>, key: &str) -> Result<String, TransferError> {
    match fields.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(TransferError::Format { path: path.into(), row: id.into(), message: format!("no text field `{key}`") }),
    }
}

/// A count that the files write as a number or as a string of digits.
fn count_field(path: &Path, id: &str, fields: &serde_json::Map<String, Value>, key: &str) -> Result<u32, TransferError> {
    let n = match fields.get(key) {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    n.and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| TransferError::Format { path: path.into(), row: id.into(), message: format!("no count `{key}`") })
}

/// Reads an official `trip_planning.json`.
pub fn load_trip_planning(path: &Path) -> Result<Vec<TripExample>, TransferError> {
    examples(path)?
        .into_iter()
        .map(|(id, f)| {
            let bad = |message: String| TransferError::Format { path: path.into(), row: id.clone(), message };
            let cities = text_field(path, &id, &f, "cities")?;
            let durations = text_field(path, &id, &f, "durations")?;
            let cities: Vec<&str> = cities.split("**").filter(|c| !c.is_empty()).collect();
            let days: Vec<u32> = durations
                .split("**")
                .filter(|d| !d.is_empty())
                .map(|d| d.trim().parse().map_err(|_| bad(format!("duration `{d}` is not a number"))))
                .collect::<Result<_, _>>()?;
            if cities.len() != days.len() || cities.is_empty() {
                return Err(bad(format!("{} cities but {} durations", cities.len(), days.len())));
            }
            Ok(TripExample {
                prompt_0shot: text_field(path, &id, &f, "prompt_0shot")?,
                prompt_5shot: text_field(path, &id, &f, "prompt_5shot")?,
                golden_plan: text_field(path, &id, &f, "golden_plan")?,
                stays: cities.iter().map(|c| c.to_string()).zip(days).collect(),
                id,
            })
        })
        .collect()
}

/// Reads an official `calendar_scheduling.json`; each golden plan must parse.
pub fn load_calendar_scheduling(path: &Path) -> Result<Vec<CalendarExample>, TransferError> {
    examples(path)?
        .into_iter()
        .map(|(id, f)| {
            let golden_plan = text_field(path, &id, &f, "golden_plan")?;
            let golden = parse_calendar(&golden_plan).ok_or_else(|| TransferError::Format {
                path: path.into(),
                row: id.clone(),
                message: format!("golden plan `{golden_plan}` names no day and time"),
            })?;
            Ok(CalendarExample {
                prompt_0shot: text_field(path, &id, &f, "prompt_0shot")?,
                prompt_5shot: text_field(path, &id, &f, "prompt_5shot")?,
                num_people: count_field(path, &id, &f, "num_people")?,
                num_days: count_field(path, &id, &f, "num_days")?,
                golden_plan,
                golden,
                id,
            })
        })
        .collect()
}

/// The number right after `prefix` in `s`, if one follows.
fn number_after(s: &str, prefix: &str) -> Option<u32> {
    let at = s.find(prefix)? + prefix.len();
    let digits: String = s[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The first `X-Y` of digits in a line.
fn first_range(line: &str) -> Option<(u32, u32)> {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()) {
            let start_end = i + b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            if b.get(start_end) == Some(&b'-') && b.get(start_end + 1).is_some_and(u8::is_ascii_digit) {
                let end_end = start_end + 1 + b[start_end + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                return Some((line[i..start_end].parse().ok()?, line[start_end + 1..end_end].parse().ok()?));
            }
            i = start_end;
        } else {
            i += 1;
        }
    }
    None
}

/// A word of letters, digits and `_` at the start of `s`.
fn word(s: &str) -> &str {
    let n = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..n]
}

/// `Day N … from A to B` in a line: (A, B), the last such pair after a `Day N`.
fn flight(line: &str) -> Option<(String, String)> {
    let day = line.find("Day ")?;
    number_after(line, "Day ")?;
    let rest = &line[day..];
    rest.rmatch_indices("from ").find_map(|(at, m)| {
        let a = word(&rest[at + m.len()..]);
        let b = word(rest[at + m.len() + a.len()..].strip_prefix(" to ")?);
        (!a.is_empty() && !b.is_empty()).then(|| (a.to_string(), b.to_string()))
    })
}

/// The stays a Trip Planning answer describes, as the benchmark's evaluation reads it:
/// the `Day X-Y` ranges in order (up to the one that ends on the trip's last day, when the
/// answer states "… European cities for N days"), the `Day N … from A to B` flights, and
/// the cities the flights leave from followed by where the last one lands, each paired
/// with its range's length. An answer with no flight describes no stays.
pub fn parse_trip(response: &str) -> Vec<(String, u32)> {
    let mut total = None;
    let (mut ranges, mut flights) = (Vec::new(), Vec::new());
    for line in response.lines() {
        if let Some(n) = number_after(line, "European cities for ") {
            total = Some(n);
        }
        if let Some((a, b)) = first_range(line) {
            ranges.push((a, b));
            if Some(b) == total {
                break;
            }
        }
        if let Some(f) = flight(line) {
            flights.push(f);
        }
    }
    let mut cities: Vec<String> = flights.iter().map(|(a, _)| a.clone()).collect();
    if let Some((_, last)) = flights.last() {
        cities.push(last.clone());
    }
    cities
        .into_iter()
        .zip(ranges)
        .map(|(city, (a, b))| (city, (b + 1).saturating_sub(a)))
        .collect()
}

/// 1 when the answer's stays begin with every golden stay, in order, with the same days.
pub fn score_trip(example: &TripExample, response: &str) -> bool {
    let parsed = parse_trip(response);
    parsed.len() >= example.stays.len() && parsed[..example.stays.len()] == example.stays[..]
}

const WEEKDAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// The meeting time an answer proposes, as the benchmark's evaluation reads it: the first
/// weekday named and exactly two `H:MM` times (start, end). Anything else is no answer.
pub fn parse_calendar(response: &str) -> Option<MeetingTime> {
    let day = WEEKDAYS.iter().filter_map(|d| response.find(d).map(|at| (at, *d))).min()?.1;
    let b = response.as_bytes();
    let mut times = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()) {
            let h_end = i + b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            if b.get(h_end) == Some(&b':') && b.get(h_end + 1).is_some_and(u8::is_ascii_digit) {
                let m_end = h_end + 1 + b[h_end + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                let (h, m): (u32, u32) = (response[i..h_end].parse().ok()?, response[h_end + 1..m_end].parse().ok()?);
                times.push(h * 60 + m);
                i = m_end;
                continue;
            }
            i = h_end;
        } else {
            i += 1;
        }
    }
    match times[..] {
        [start, end] => Some(MeetingTime { day: day.to_string(), start, end }),
        _ => None,
    }
}

/// 1 when the proposed day, start and end are the golden ones.
pub fn score_calendar(example: &CalendarExample, response: &str) -> bool {
    parse_calendar(response).as_ref() == Some(&example.golden)
}

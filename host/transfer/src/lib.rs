//! The zero-shot transfer benchmarks of the paper's Table 1, each scored by exact match
//! under its own protocol:
//!
//! | benchmark | loader | scorer |
//! |---|---|---|
//! | ProntoQA (True / False after a chain of reasoning) | [`load_prontoqa`] | [`score_prontoqa`] |
//! | NATURAL PLAN Trip Planning | [`load_trip_planning`] | [`score_trip`] |
//! | NATURAL PLAN Calendar Scheduling | [`load_calendar_scheduling`] | [`score_calendar`] |
//!
//! Answer extraction never fails: an answer that cannot be read scores 0, like a wrong one.
//!
//! ```
//! use onebrain_transfer::{parse_trip, extract_label};
//!
//! let plan = parse_trip("Here is the trip plan for visiting the 2 European cities for 5 days:\n\
//!     **Day 1-3:** Arriving in Oslo and visit Oslo for 3 days.\n\
//!     **Day 3:** Fly from Oslo to Riga.\n\
//!     **Day 3-5:** Visit Riga for 3 days.");
//! assert_eq!(plan, [("Oslo".to_string(), 3), ("Riga".to_string(), 3)]);
//! assert_eq!(extract_label("Max is a tumpus. So the answer is false."), Some(false));
//! ```
#![deny(missing_docs)]

mod natural_plan;
mod prontoqa;

pub use natural_plan::{
    load_calendar_scheduling, load_trip_planning, parse_calendar, parse_trip, score_calendar, score_trip,
    CalendarExample, MeetingTime, TripExample,
};
pub use prontoqa::{extract_label, load_prontoqa, prontoqa_prompt, score_prontoqa, ProntoQaExample};

use std::path::PathBuf;

/// Why a benchmark file could not be loaded; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A row is not what the benchmark's format says.
    #[error("{path}: {row}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// The line number (JSONL) or example id (JSON).
        row: String,
        /// What is wrong.
        message: String,
    },
}

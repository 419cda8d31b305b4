//! What a successful write reports back, whichever backend made it: below the write
//! commands (`commands.rs`) and the tables' own modules that produce it.

/// What a successful write reports back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// The id of an inserted row.
    RowId(i64),
    /// How many rows the write changed.
    Changed(usize),
}

impl Outcome {
    pub fn changed(self) -> usize {
        match self {
            Outcome::Changed(n) => n,
            Outcome::Done | Outcome::RowId(_) => 0,
        }
    }
}

//! The time zone cron schedules are read in (`cron.timezone`): parsed here, below cron, so
//! loading the configuration can reject an unknown zone without reaching up into the
//! scheduler that later uses it.

use std::str::FromStr;

use chrono::{DateTime, FixedOffset, Local, NaiveDateTime, TimeZone, Utc};

/// A `cron.timezone` value that names no IANA zone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone {name:?} (expected an IANA name such as Europe/Paris)")]
pub struct UnknownZone {
    pub name: String,
}

/// A configured IANA zone, or the host's own when none is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    Named(chrono_tz::Tz),
    Host,
}

impl Zone {
    /// An IANA name (`Europe/Paris`); empty means the host's zone.
    pub fn parse(name: &str) -> Result<Self, UnknownZone> {
        let name = name.trim();
        if name.is_empty() {
            return Ok(Self::Host);
        }
        chrono_tz::Tz::from_str(name)
            .map(Self::Named)
            .map_err(|_| UnknownZone {
                name: name.to_owned(),
            })
    }

    /// `t` as a wall-clock time with this zone's offset.
    pub fn at(&self, t: DateTime<Utc>) -> DateTime<FixedOffset> {
        match self {
            Self::Named(tz) => t.with_timezone(tz).fixed_offset(),
            Self::Host => t.with_timezone(&Local).fixed_offset(),
        }
    }

    /// A wall-clock time in this zone (the earlier instant when a clock change repeats it;
    /// `None` inside a gap).
    pub fn localize(&self, naive: NaiveDateTime) -> Option<DateTime<FixedOffset>> {
        match self {
            Self::Named(tz) => tz
                .from_local_datetime(&naive)
                .earliest()
                .map(|t| t.fixed_offset()),
            Self::Host => Local
                .from_local_datetime(&naive)
                .earliest()
                .map(|t| t.fixed_offset()),
        }
    }
}

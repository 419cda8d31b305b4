//! Timestamps as the Python tools print them, in UTC (hermesd has no time-zone database).

fn parts(epoch: f64) -> (i64, u32, u32, i64, i64, i64) {
    let secs = epoch.floor() as i64;
    let (y, m, d) = crate::clock::civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    (y, m, d, rem / 3600, (rem % 3600) / 60, rem % 60)
}

/// `%Y-%m-%dT%H:%M:%S`.
pub fn iso_utc(epoch: f64) -> String {
    let (y, m, d, h, min, s) = parts(epoch);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}")
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// `%B %d, %Y at %I:%M %p`, e.g. `March 05, 2026 at 02:15 PM`.
pub fn human(epoch: f64) -> String {
    let (y, m, d, h, min, _) = parts(epoch);
    let month = MONTHS[(m as usize).saturating_sub(1).min(11)];
    let (hour12, meridiem) = match h {
        0 => (12, "AM"),
        1..=11 => (h, "AM"),
        12 => (12, "PM"),
        _ => (h - 12, "PM"),
    };
    format!("{month} {d:02}, {y} at {hour12:02}:{min:02} {meridiem}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_strftime() {
        assert_eq!(iso_utc(0.0), "1970-01-01T00:00:00");
        assert_eq!(iso_utc(1_772_720_100.5), "2026-03-05T14:15:00");
        assert_eq!(human(1_772_720_100.0), "March 05, 2026 at 02:15 PM");
        assert_eq!(human(0.0), "January 01, 1970 at 12:00 AM");
    }
}

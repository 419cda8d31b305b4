//! Session ids in the Hermes format: `YYYYMMDD_HHMMSS_<8 hex>`.
//!
//! Hermes uses local time; hermesd uses UTC so ids sort the same on every host and never
//! depend on the process's timezone (the format, which tools parse, is identical).

use rand::Rng;

pub fn new_session_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, secs) = (now.div_euclid(86_400), now.rem_euclid(86_400));
    let (y, m, d) = crate::clock::civil_from_days(days);
    let suffix: u32 = rand::rng().random();
    format!(
        "{y:04}{m:02}{d:02}_{:02}{:02}{:02}_{suffix:08x}",
        secs / 3600,
        (secs % 3600) / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn has_the_hermes_shape() {
        let id = super::new_session_id();
        let parts: Vec<&str> = id.split('_').collect();
        assert_eq!(parts.len(), 3, "{id}");
        assert_eq!((parts[0].len(), parts[1].len(), parts[2].len()), (8, 6, 8));
        assert!(id.chars().all(|c| c.is_ascii_hexdigit() || c == '_'));
        assert_ne!(super::new_session_id(), id);
    }
}

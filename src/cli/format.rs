//! Human-readable formatting for command output: timestamps and fixed-width tables.

/// Formats epoch seconds as `YYYY-MM-DD HH:MM` (UTC).
pub fn timestamp(epoch: f64) -> String {
    let secs = epoch.floor() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = crate::clock::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// Shortens `s` to at most `max` characters, marking the cut with `…`.
pub fn truncate(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut out: String = flat.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Renders rows as left-aligned columns separated by two spaces.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let render = |cells: Vec<&str>| {
        let line: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        line.join("  ").trim_end().to_owned()
    };
    let mut out = render(header.to_vec());
    out.push('\n');
    for row in rows {
        out.push_str(&render(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_epoch_seconds() {
        assert_eq!(timestamp(0.0), "1970-01-01 00:00");
        assert_eq!(timestamp(1_795_982_580.5), "2026-11-29 20:03");
        assert_eq!(timestamp(951_782_400.0), "2000-02-29 00:00");
    }

    #[test]
    fn tables_align_and_truncate() {
        let t = table(&["ID", "TITLE"], &[vec!["a".into(), "long title".into()]]);
        assert_eq!(t, "ID  TITLE\na   long title\n");
        assert_eq!(truncate("hello\nworld", 8), "hello w…");
    }
}

//! Unified diffs of an edit, headed `--- a/<path>` / `+++ b/<path>` like Python's
//! `difflib.unified_diff` output in the patch tool.

use similar::TextDiff;

pub fn unified_diff(old: &str, new: &str, from: &str, to: &str) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .missing_newline_hint(false)
        .header(from, to)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_difflib_for_a_one_line_change() {
        let diff = unified_diff(
            "alpha\nbeta\nalpha\n",
            "alpha\ndelta\nalpha\n",
            "a//w/a.txt",
            "b//w/a.txt",
        );
        assert_eq!(
            diff,
            "--- a//w/a.txt\n+++ b//w/a.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+delta\n alpha\n"
        );
        assert_eq!(unified_diff("same\n", "same\n", "a", "b"), "");
    }
}

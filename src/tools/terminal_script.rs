//! The shell text around a terminal command, the same on every backend: the wrapper that
//! changes into the session's directory and reports where the command ended, and the marker
//! that carries that directory back out of the output.

use std::path::PathBuf;

use crate::process::shell_quote;

/// The command wrapped so the shell reports the directory it ends in.
pub(super) fn wrap_command(command: &str, cwd: &str, marker: &str) -> String {
    let target = match cwd {
        "~" => "~".to_owned(),
        "~/" => "$HOME".to_owned(),
        _ => match cwd.strip_prefix("~/") {
            Some(rest) => format!("$HOME/{}", shell_quote(rest)),
            None => shell_quote(cwd),
        },
    };
    format!(
        "command cd -- {target} || exit 126\neval {}\n__hermes_ec=$?\nprintf '\\n{marker}%s{marker}\\n' \"$(pwd -P)\"\nexit $__hermes_ec",
        shell_quote(command)
    )
}

/// Removes the cwd marker line from the output and returns the directory it carried.
pub(super) fn extract_cwd(output: &mut String, marker: &str) -> Option<PathBuf> {
    let last = output.rfind(marker)?;
    let search_start = last.saturating_sub(4096);
    let search_start = (0..=search_start)
        .rev()
        .find(|i| output.is_char_boundary(*i))
        .unwrap_or(0);
    let first = output[search_start..last]
        .rfind(marker)
        .map(|i| i + search_start)?;
    let cwd = output[first + marker.len()..last].trim().to_owned();
    let line_start = output[..first].rfind('\n').unwrap_or(first);
    let after = last + marker.len();
    let line_end = output[after..]
        .find('\n')
        .map_or(output.len(), |i| after + i + 1);
    output.replace_range(line_start..line_end, "");
    (!cwd.is_empty()).then(|| PathBuf::from(cwd))
}

/// A new random marker the wrapped command prints its final directory between.
pub(super) fn cwd_marker() -> String {
    format!(
        "__HERMES_CWD_{:012x}__",
        rand::random::<u64>() & 0xffff_ffff_ffff
    )
}

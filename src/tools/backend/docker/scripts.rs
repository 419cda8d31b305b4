//! The small POSIX `sh` programs hermesd runs in a container, and the end mark the command
//! wrapper prints.
//!
//! The Engine API can start a process in a container but cannot signal it, so the wrapper
//! records its own pid in `/tmp` and a second exec kills that process, its group and every
//! descendant. The wrapper then prints an end mark with the exit status: an engine may keep
//! the output stream open while a backgrounded child still holds it, and the mark tells the
//! reader the command itself is done. Only shell builtins are relied on, plus `rm`, `cat`,
//! `mkdir` and `sleep`, which every image with a shell has.

/// Runs `$1` under bash when the image has it, else sh, starting in `$3`. `$2` is the
/// exec's random token naming its pid file, its kill mark and its end mark.
pub(super) const WRAPPER: &str = r#"t=$2; f=/tmp/.hermesd-$t
{ echo $$ >"$f.pid"; } 2>/dev/null
if [ -e "$f.kill" ]; then exit 137; fi
cd -- "$3" 2>/dev/null
if command -v bash >/dev/null 2>&1; then bash -c "$1"; else sh -c "$1"; fi
s=$?
rm -f "$f.pid" 2>/dev/null
printf '\036hermesd-end %s %d\036' "$t" "$s"
exit "$s""#;

/// Kills the command of token `$1`: the kill mark first (a wrapper that starts later exits at
/// once), then every process of the tree frozen with STOP so none forks away, TERM to all
/// and to the wrapper's process group, a second's grace, KILL.
pub(super) const KILL: &str = r#"f=/tmp/.hermesd-$1
{ : >"$f.kill"; } 2>/dev/null
{ read -r p <"$f.pid"; } 2>/dev/null || exit 0
case $p in ''|*[!0-9]*) exit 0;; esac
kill -STOP "$p" 2>/dev/null
all=$p; new=$p
while [ -n "$new" ]; do
  next=
  for s in /proc/[0-9]*/stat; do
    { read -r l <"$s"; } 2>/dev/null || continue
    set -- ${l##*") "}
    for q in $new; do
      if [ "$2" = "$q" ]; then c=${s#/proc/}; c=${c%/stat}; kill -STOP "$c" 2>/dev/null; next="$next $c"; fi
    done
  done
  all="$all$next"; new=$next
done
kill -TERM -- "-$p" 2>/dev/null
for c in $all; do kill -TERM "$c" 2>/dev/null; kill -CONT "$c" 2>/dev/null; done
kill -CONT -- "-$p" 2>/dev/null
sleep 1 2>/dev/null
kill -KILL -- "-$p" 2>/dev/null
for c in $all; do kill -KILL "$c" 2>/dev/null; done
rm -f "$f.pid" "$f.kill" 2>/dev/null
exit 0"#;

/// Exit status of [`READ`] for a path that does not exist.
pub(super) const READ_MISSING: i64 = 3;
/// Exit status of [`READ`] for a path that is not a regular file.
pub(super) const READ_NOT_FILE: i64 = 4;

/// Prints file `$1`.
pub(super) const READ: &str = r#"[ -e "$1" ] || exit 3
[ -f "$1" ] || exit 4
exec cat -- "$1""#;

/// Writes stdin to file `$1`, making its parent directories.
pub(super) const WRITE: &str = r#"d=${1%/*}
if [ -n "$d" ] && [ "$d" != "$1" ]; then mkdir -p -- "$d" || exit 1; fi
cat >"$1""#;

/// Finds the wrapper's end mark in its stdout and holds back bytes that may be its start,
/// so the mark never reaches the model and is found even when split across frames.
#[derive(Debug)]
pub(super) struct EndMark {
    prefix: Vec<u8>,
    held: Vec<u8>,
    status: Option<i32>,
}

impl EndMark {
    pub(super) fn new(token: &str) -> Self {
        Self {
            prefix: format!("\u{1e}hermesd-end {token} ").into_bytes(),
            held: Vec::new(),
            status: None,
        }
    }

    /// The exit status, once the mark was seen.
    pub(super) fn status(&self) -> Option<i32> {
        self.status
    }

    /// Takes a chunk of stdout and returns the bytes that are output.
    pub(super) fn feed(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.status.is_some() {
            return chunk.to_vec();
        }
        self.held.extend_from_slice(chunk);
        let mut from = 0;
        while let Some(at) = find(&self.held[from..], 0x1e).map(|i| i + from) {
            let rest = &self.held[at..];
            if rest.len() < self.prefix.len() {
                if self.prefix.starts_with(rest) {
                    // Maybe the mark's start: keep it until more arrives.
                    return self.held.drain(..at).collect();
                }
            } else if rest.starts_with(&self.prefix) {
                let digits = &rest[self.prefix.len()..];
                let end = digits.iter().position(|b| !b.is_ascii_digit());
                match end {
                    None => return self.held.drain(..at).collect(),
                    Some(n) if n > 0 && digits[n] == 0x1e => {
                        let status = std::str::from_utf8(&digits[..n])
                            .ok()
                            .and_then(|d| d.parse().ok());
                        if let Some(status) = status {
                            self.status = Some(status);
                            let after = at + self.prefix.len() + n + 1;
                            let mut out: Vec<u8> = self.held[..at].to_vec();
                            out.extend_from_slice(&self.held[after..]);
                            self.held.clear();
                            return out;
                        }
                    }
                    Some(_) => {}
                }
            }
            from = at + 1;
        }
        std::mem::take(&mut self.held)
    }

    /// What is still held back when the stream ends without a mark.
    pub(super) fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }
}

fn find(haystack: &[u8], byte: u8) -> Option<usize> {
    haystack.iter().position(|b| *b == byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_mark_is_found_across_frames_and_never_shown() {
        let stream = b"hello\n\x1eother\x1e\x1ehermesd-end tok 42\x1elate";
        for split in 0..stream.len() {
            let mut mark = EndMark::new("tok");
            let mut out = mark.feed(&stream[..split]);
            out.extend(mark.feed(&stream[split..]));
            out.extend(mark.finish());
            assert_eq!(mark.status(), Some(42), "split at {split}");
            assert_eq!(out, b"hello\n\x1eother\x1elate", "split at {split}");
        }
    }

    #[test]
    fn a_mark_with_another_token_is_output() {
        let mut mark = EndMark::new("tok");
        let mut out = mark.feed(b"\x1ehermesd-end other 1\x1e");
        out.extend(mark.finish());
        assert_eq!(mark.status(), None);
        assert_eq!(out, b"\x1ehermesd-end other 1\x1e");
    }
}

//! Splitting long replies into platform-sized chunks, exactly as Hermes does: prefer
//! newlines, then spaces; never split inside an inline code span; close a code fence at a
//! chunk boundary and reopen it with the same language; number the chunks ` (i/N)`. Length
//! is measured in the platform's own unit. Nothing is ever dropped for being long.

use hermes_adapter::LengthUnit;

const INDICATOR_RESERVE: usize = 10;
const FENCE_CLOSE: &str = "\n```";

fn measure(unit: LengthUnit, chars: &[char]) -> usize {
    match unit {
        LengthUnit::Chars => chars.len(),
        LengthUnit::Utf16 => chars.iter().map(|c| c.len_utf16()).sum(),
        LengthUnit::Bytes => chars.iter().map(|c| c.len_utf8()).sum(),
    }
}

/// The largest prefix length (in characters) whose measured length fits `budget`.
fn fit(unit: LengthUnit, chars: &[char], budget: usize) -> usize {
    let mut used = 0;
    for (i, c) in chars.iter().enumerate() {
        let width = measure(unit, std::slice::from_ref(c));
        if used + width > budget {
            return i;
        }
        used += width;
    }
    chars.len()
}

fn rfind(chars: &[char], needle: char, end: usize) -> Option<usize> {
    chars[..end.min(chars.len())]
        .iter()
        .rposition(|c| *c == needle)
}

/// Splits `content` into chunks of at most `max_length` units.
pub fn chunk_message(content: &str, max_length: usize, unit: LengthUnit) -> Vec<String> {
    if unit.measure(content) <= max_length {
        return vec![content.to_owned()];
    }
    let mut chunks = Vec::new();
    let mut remaining: Vec<char> = content.chars().collect();
    let mut carry_lang: Option<String> = None;
    while !remaining.is_empty() {
        let prefix = carry_lang
            .as_ref()
            .map(|lang| format!("```{lang}\n"))
            .unwrap_or_default();
        let prefix_len = unit.measure(&prefix);
        let mut headroom =
            max_length.saturating_sub(INDICATOR_RESERVE + prefix_len + unit.measure(FENCE_CLOSE));
        if headroom < 1 {
            headroom = (max_length / 2).max(1);
        }
        if prefix_len + measure(unit, &remaining) <= max_length.saturating_sub(INDICATOR_RESERVE) {
            chunks.push(prefix + &remaining.iter().collect::<String>());
            break;
        }
        let limit = fit(unit, &remaining, headroom);
        let mut split_at = rfind(&remaining, '\n', limit).map_or(-1, |i| i as isize);
        if split_at < (limit / 2) as isize {
            split_at = rfind(&remaining, ' ', limit).map_or(-1, |i| i as isize);
        }
        let mut split_at = if split_at < 1 {
            limit.max(1)
        } else {
            split_at as usize
        };
        split_at = avoid_inline_code(&remaining[..split_at.min(remaining.len())], split_at, limit);
        let split_at = split_at.min(remaining.len());
        let body: String = remaining[..split_at].iter().collect();
        let rest = &remaining[split_at..];
        let skip = rest.iter().take_while(|c| c.is_whitespace()).count();
        remaining = rest[skip..].to_vec();

        let (in_code, lang) = fence_state(&body, carry_lang.clone());
        let mut full = prefix + &body;
        if in_code {
            full.push_str(FENCE_CLOSE);
            carry_lang = Some(lang);
        } else {
            carry_lang = None;
        }
        chunks.push(full);
    }
    if chunks.len() > 1 {
        let total = chunks.len();
        for (i, chunk) in chunks.iter_mut().enumerate() {
            chunk.push_str(&format!(" ({}/{total})", i + 1));
        }
    }
    chunks
}

/// Moves a split that falls inside an inline code span back to a space or newline before
/// the opening backtick, when that is beyond a quarter of the budget.
fn avoid_inline_code(candidate: &[char], split_at: usize, limit: usize) -> usize {
    let ticks = candidate.iter().filter(|c| **c == '`').count();
    let escaped = candidate.windows(2).filter(|w| w == &['\\', '`']).count();
    if (ticks - escaped) % 2 == 0 {
        return split_at;
    }
    let mut last = rfind(candidate, '`', candidate.len());
    while let Some(i) = last {
        if i > 0 && candidate[i - 1] == '\\' {
            last = rfind(candidate, '`', i);
        } else {
            break;
        }
    }
    match last {
        Some(bt) if bt > 0 => {
            let space = rfind(candidate, ' ', bt);
            let newline = rfind(candidate, '\n', bt);
            match space.max(newline) {
                Some(safe) if safe > limit / 4 => safe,
                _ => split_at,
            }
        }
        _ => split_at,
    }
}

/// Whether `body` ends inside a ``` fence (given the fence carried in), and its language.
fn fence_state(body: &str, carried: Option<String>) -> (bool, String) {
    let mut in_code = carried.is_some();
    let mut lang = carried.unwrap_or_default();
    for line in body.split('\n') {
        let stripped = line.trim();
        if let Some(tag) = stripped.strip_prefix("```") {
            if in_code {
                in_code = false;
                lang.clear();
            } else {
                in_code = true;
                lang = tag.split_whitespace().next().unwrap_or("").to_owned();
            }
        }
    }
    (in_code, lang)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn matches_the_reference_example() {
        let chunks = chunk_message(&"a".repeat(5000), 2000, LengthUnit::Chars);
        let lengths: Vec<usize> = chunks.iter().map(|c| c.chars().count()).collect();
        assert_eq!(lengths, [1992, 1992, 1034]);
        assert!(chunks[0].ends_with(" (1/3)") && chunks[2].ends_with(" (3/3)"));
    }

    #[test]
    fn short_text_is_untouched() {
        assert_eq!(chunk_message("hi", 10, LengthUnit::Utf16), ["hi"]);
    }

    #[test]
    fn fences_are_closed_and_reopened_with_their_language() {
        let code: String = (0..200).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("intro\n```rust\n{code}```\nafter");
        let chunks = chunk_message(&text, 500, LengthUnit::Chars);
        assert!(chunks.len() > 2);
        for (i, chunk) in chunks.iter().enumerate() {
            assert_eq!(chunk.matches("```").count() % 2, 0, "chunk {i}: {chunk}");
            if i > 0 && i < chunks.len() - 1 {
                assert!(chunk.starts_with("```rust\n"), "chunk {i}");
            }
        }
    }

    fn random_text(rng: &mut StdRng) -> String {
        // Realistic replies: fenced blocks start and end on their own lines.
        let pieces = [
            "word ",
            "😀",
            "中文字符",
            "\n",
            "`code`",
            "\n```py\nprint(1)\nx = [1, 2]\n```\n",
            "  ",
            "a",
            "\\`",
            "longwordwithoutspaces",
            "\n```\nplain block line\n```\n",
        ];
        let n = rng.random_range(0..600);
        (0..n)
            .map(|_| pieces[rng.random_range(0..pieces.len())])
            .collect()
    }

    fn strip_markup(chunk: &str) -> String {
        chunk
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '`')
            .collect()
    }

    #[test]
    fn property_chunks_fit_reassemble_and_balance() {
        let seed: u64 = rand::rng().random();
        println!("seed {seed}");
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..300 {
            let text = random_text(&mut rng);
            let unit =
                [LengthUnit::Utf16, LengthUnit::Chars, LengthUnit::Bytes][rng.random_range(0..3)];
            let limit = rng.random_range(60..400);
            let chunks = chunk_message(&text, limit, unit);
            let total = chunks.len();
            let mut rebuilt = String::new();
            for (i, chunk) in chunks.iter().enumerate() {
                assert!(
                    unit.measure(chunk) <= limit,
                    "seed {seed}: chunk over {limit} {unit:?}"
                );
                let body = if total > 1 {
                    chunk
                        .strip_suffix(&format!(" ({}/{total})", i + 1))
                        .expect("indicator")
                } else {
                    chunk
                };
                let fences = body.lines().filter(|l| l.trim().starts_with("```")).count();
                assert_eq!(fences % 2, 0, "seed {seed}: unbalanced fences in {body:?}");
                rebuilt.push_str(body);
            }
            // Fences added at boundaries only add backticks and language tags; every other
            // character survives in order.
            let original = strip_markup(&text);
            let rebuilt = strip_markup(&rebuilt);
            let mut rest = rebuilt.as_str();
            for c in original.chars() {
                let at = rest
                    .find(c)
                    .unwrap_or_else(|| panic!("seed {seed}: lost {c:?}"));
                rest = &rest[at + c.len_utf8()..];
            }
        }
    }
}

//! The YAML block between `---` fences that opens a SKILL.md (and DESCRIPTION.md): split it
//! from the body and read it as JSON-like values. A block that is not valid YAML falls back
//! to `key: value` lines, as Hermes reads it, so a slightly broken skill still shows up.

use serde_json::{Map, Value};

/// The frontmatter (empty when there is none) and the body after it.
pub fn split(content: &str) -> (Map<String, Value>, &str) {
    let content = content.strip_prefix('\u{feff}').unwrap_or(content);
    let Some(rest) = content.strip_prefix("---") else {
        return (Map::new(), content);
    };
    let Some((yaml, body)) = closing_fence(rest) else {
        return (Map::new(), content);
    };
    (parse_block(yaml), body)
}

/// Finds `\n---` followed by optional spaces and a newline; returns (block, body after it).
fn closing_fence(rest: &str) -> Option<(&str, &str)> {
    let mut from = 0;
    while let Some(found) = rest[from..].find("\n---") {
        let start = from + found;
        let after = &rest[start + 4..];
        let line_end = after.find('\n')?;
        if after[..line_end].trim().is_empty() {
            return Some((&rest[..start], &after[line_end + 1..]));
        }
        from = start + 4;
    }
    None
}

fn parse_block(yaml: &str) -> Map<String, Value> {
    match serde_norway::from_str::<Value>(yaml) {
        Ok(Value::Object(map)) => map,
        Ok(_) => Map::new(),
        Err(_) => yaml
            .lines()
            .filter_map(|line| line.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), Value::String(v.trim().to_owned())))
            .collect(),
    }
}

/// A string field, trimmed of whitespace and surrounding quotes; `None` when absent or empty.
pub fn text(map: &Map<String, Value>, key: &str) -> Option<String> {
    let value = match map.get(key)? {
        Value::String(s) => s.clone(),
        Value::Null => return None,
        other => other.to_string(),
    };
    let value = value.trim().trim_matches(|c| c == '\'' || c == '"').trim();
    (!value.is_empty()).then(|| value.to_owned())
}

/// A field that may be one string or a list of them.
pub fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_owned()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(s) => Some(s.trim().to_owned()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .filter(|s| !s.is_empty())
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_yaml_frontmatter_from_the_body() {
        let (map, body) = split(
            "\u{feff}---\nname: pdf-tools\ndescription: 'Work with PDFs'\nplatforms: [linux, macos]\n---\n# Body\ntext\n",
        );
        assert_eq!(text(&map, "name").as_deref(), Some("pdf-tools"));
        assert_eq!(text(&map, "description").as_deref(), Some("Work with PDFs"));
        assert_eq!(strings(map.get("platforms")), ["linux", "macos"]);
        assert_eq!(body, "# Body\ntext\n");
    }

    #[test]
    fn no_fence_or_no_closing_fence_means_no_frontmatter() {
        let (map, body) = split("# Just a body\n");
        assert!(map.is_empty());
        assert_eq!(body, "# Just a body\n");
        let (map, _) = split("---\nname: x\nno end\n");
        assert!(map.is_empty());
    }

    #[test]
    fn broken_yaml_falls_back_to_key_value_lines() {
        let (map, body) = split("---\nname: odd\ndescription: a: b: [unclosed\n---\nbody\n");
        assert_eq!(text(&map, "name").as_deref(), Some("odd"));
        assert_eq!(body, "body\n");
    }
}

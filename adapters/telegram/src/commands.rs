//! The command menu: names sanitised to Telegram's rules (lowercase `[a-z0-9_]`, 1–32
//! characters), descriptions trimmed to 1–256 characters, duplicates dropped, at most 100.

use serde_json::{Value, json};

const MAX_COMMANDS: usize = 100;

/// `name` as Telegram accepts it, or `None` when nothing usable remains.
pub fn sanitize_name(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.trim().trim_start_matches('/').chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
            out.push(c);
        } else if matches!(c, '-' | ' ' | '.') && !out.ends_with('_') {
            out.push('_');
        }
    }
    let out: String = out.trim_matches('_').chars().take(32).collect();
    let out = out.trim_end_matches('_').to_owned();
    (!out.is_empty()).then_some(out)
}

fn sanitize_description(description: &str, name: &str) -> String {
    let trimmed = description.trim();
    let text = if trimmed.is_empty() { name } else { trimmed };
    let mut out: String = text.chars().take(256).collect();
    if text.chars().count() > 256 {
        out = text.chars().take(255).collect::<String>() + "…";
    }
    out
}

/// The `commands` parameter for setMyCommands.
pub fn menu(commands: &[(String, String)]) -> Value {
    let mut seen = std::collections::BTreeSet::new();
    let list: Vec<Value> = commands
        .iter()
        .filter_map(|(name, description)| {
            let name = sanitize_name(name)?;
            seen.insert(name.clone()).then(|| json!({"command": name, "description": sanitize_description(description, &name)}))
        })
        .take(MAX_COMMANDS)
        .collect();
    Value::Array(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_telegram_rules() {
        assert_eq!(sanitize_name("/New").as_deref(), Some("new"));
        assert_eq!(sanitize_name("reload-mcp").as_deref(), Some("reload_mcp"));
        assert_eq!(sanitize_name("Ünïcode!").as_deref(), Some("ncode"));
        assert_eq!(sanitize_name("---"), None);
        assert_eq!(sanitize_name(&"a".repeat(40)).map(|n| n.len()), Some(32));
    }
}

//! Sets keys of a config.yaml section in place (`model:` for `/model --global`, `agent:` for
//! `/personality`), as a line edit so the user's comments, ordering and layout survive: only
//! the values change. Handles the forms Hermes writes — `model: name` and a block of
//! `key: value` lines — and refuses anything else (flow mappings, anchors, block scalars, a value spanning
//! lines) rather than guess. Every edit is checked by parsing the result: the document must
//! equal the original with just those keys set, or nothing is written.

use serde_norway::{Mapping, Value as Yaml};

/// Why `model:` was left as it is; the text is shown to the user who asked for the change.
#[derive(Debug, thiserror::Error)]
pub enum ModelEditError {
    #[error("config.yaml has more than one `{section}:` key")]
    DuplicateModelKey { section: String },
    #[error("`model:` is a single name; cannot set other keys in place")]
    ScalarModel,
    #[error("the `{section}:` block is indented with tabs")]
    TabIndented { section: String },
    /// `key:` with its value on the following lines (a block scalar or nested mapping).
    #[error("`{key}` has no value on its own line")]
    NoInlineValue { key: String },
    /// Flow collections, anchors, aliases, tags and block text are left to the user.
    #[error(
        "`{key}` is written in a form hermesd does not edit (flow, anchor, alias, tag or \
         block text)"
    )]
    UneditableForm { key: String },
    #[error("an unterminated quoted value")]
    UnterminatedQuote,
    #[error("text after a quoted value")]
    TextAfterQuote,
    #[error("config.yaml is not valid YAML: {0}")]
    InvalidYaml(#[source] serde_norway::Error),
    #[error("the edit would break config.yaml")]
    EditBreaksYaml,
    #[error("config.yaml is not a mapping")]
    NotAMapping,
    /// The parsed result differs from the original beyond the keys set.
    #[error("config.yaml's layout is one hermesd cannot edit safely; set `{key}` by hand")]
    UnsafeLayout { key: String },
}

/// The new text of `original` with `model.<key>` set to each value (`default` first).
pub fn set_model_keys(original: &str, values: &[(&str, &str)]) -> Result<String, ModelEditError> {
    set_section_keys(original, "model", values)
}

/// The new text of `original` with `<section>.<key>` set to each value. Only `model` may be
/// written as a single name (`model: gpt-x`, whose name is `default`).
pub fn set_section_keys(
    original: &str,
    section: &str,
    values: &[(&str, &str)],
) -> Result<String, ModelEditError> {
    let edited = edit(original, section, values)?;
    verify(original, &edited, section, values)?;
    Ok(edited)
}

fn edit(original: &str, section: &str, values: &[(&str, &str)]) -> Result<String, ModelEditError> {
    let lines: Vec<&str> = original.split_inclusive('\n').collect();
    let newline = if original.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let headers: Vec<usize> = (0..lines.len())
        .filter(|&i| key_of(lines[i]).is_some_and(|(indent, key)| indent == 0 && key == section))
        .collect();
    let header = match headers.as_slice() {
        [] => {
            let mut out = original.to_owned();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push_str(newline);
            }
            out.push_str(&format!("{section}:{newline}"));
            for (key, value) in values {
                out.push_str(&format!("  {key}: {}{newline}", scalar(value)));
            }
            return Ok(out);
        }
        [one] => *one,
        _ => {
            return Err(ModelEditError::DuplicateModelKey {
                section: section.to_owned(),
            });
        }
    };
    let (value_at, value, comment) = split_value(lines[header], section.len() + 1)?;
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    if !value.is_empty() {
        // `model: name`.
        check_plain_or_quoted(value, section)?;
        if section != "model" {
            return Err(ModelEditError::UneditableForm {
                key: section.to_owned(),
            });
        }
        let [(key, new)] = values else {
            // Other keys as well: the scalar becomes a block (Hermes reads both).
            let mut block = format!("model:{comment}{newline}");
            for (key, value) in values {
                block.push_str(&format!("  {key}: {}{newline}", scalar(value)));
            }
            out[header] = block;
            return Ok(out.concat());
        };
        if *key != "default" {
            return Err(ModelEditError::ScalarModel);
        }
        out[header] = rebuild(lines[header], value_at, new, comment, newline);
        return Ok(out.concat());
    }
    // A `model:` block: its lines run until the next line at column 0.
    let end = (header + 1..lines.len())
        .find(|&i| {
            let line = lines[i];
            let trimmed = line.trim_start();
            !trimmed.trim().is_empty()
                && !trimmed.starts_with('#')
                && !line.starts_with([' ', '\t'])
        })
        .unwrap_or(lines.len());
    let indent = (header + 1..end)
        .filter_map(|i| key_of(lines[i]).map(|(indent, _)| indent))
        .min();
    if (header + 1..end).any(|i| lines[i].starts_with('\t')) {
        return Err(ModelEditError::TabIndented {
            section: section.to_owned(),
        });
    }
    let indent = indent.unwrap_or(2);
    let mut missing = Vec::new();
    for (key, new) in values {
        let found = (header + 1..end)
            .find(|&i| key_of(lines[i]).is_some_and(|(at, name)| at == indent && name == *key));
        match found {
            Some(i) => {
                let (value_at, value, comment) = split_value(lines[i], indent + key.len() + 1)?;
                check_plain_or_quoted(value, &format!("{section}.{key}"))?;
                if value.is_empty() {
                    return Err(ModelEditError::NoInlineValue {
                        key: format!("{section}.{key}"),
                    });
                }
                out[i] = rebuild(lines[i], value_at, new, comment, newline);
            }
            None => missing.push((*key, *new)),
        }
    }
    if !missing.is_empty() {
        let pad = " ".repeat(indent);
        let inserted: String = missing
            .iter()
            .map(|(key, value)| format!("{pad}{key}: {}{newline}", scalar(value)))
            .collect();
        if !out[header].ends_with('\n') {
            out[header].push_str(newline);
        }
        out[header].push_str(&inserted);
    }
    Ok(out.concat())
}

/// `(indentation, key)` of a `key:` line (not a comment, list item or blank).
fn key_of(line: &str) -> Option<(usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let colon = rest.find(':')?;
    let key = &rest[..colon];
    let well_formed = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let after = rest[colon + 1..].chars().next();
    (well_formed && after.is_none_or(char::is_whitespace)).then_some((indent, key))
}

/// Splits a `key: value  # comment` line at byte `from` (just past the colon) into the
/// value's start, the value and what follows it (spaces and comment, no line end).
fn split_value(line: &str, from: usize) -> Result<(usize, &str, &str), ModelEditError> {
    let body = line.trim_end_matches(['\n', '\r']);
    let rest = &body[from..];
    let value_at = from + (rest.len() - rest.trim_start().len());
    let text = &body[value_at..];
    if text.is_empty() || text.starts_with('#') {
        return Ok((value_at, "", rest));
    }
    let end = match text.chars().next() {
        Some('"') => closing(text, '"').ok_or(ModelEditError::UnterminatedQuote)? + 1,
        Some('\'') => closing(text, '\'').ok_or(ModelEditError::UnterminatedQuote)? + 1,
        _ => text.find(" #").unwrap_or(text.len()),
    };
    let value = text[..end].trim_end();
    let tail = &body[value_at + value.len()..];
    if !(tail.trim().is_empty() || tail.trim_start().starts_with('#')) {
        return Err(ModelEditError::TextAfterQuote);
    }
    Ok((value_at, value, tail))
}

fn closing(text: &str, quote: char) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] as char {
            '\\' if quote == '"' => i += 2,
            c if c == quote => {
                if quote == '\'' && bytes.get(i + 1) == Some(&b'\'') {
                    i += 2;
                } else {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

fn check_plain_or_quoted(value: &str, key: &str) -> Result<(), ModelEditError> {
    match value.chars().next() {
        Some('{' | '[' | '&' | '*' | '|' | '>' | '!') => Err(ModelEditError::UneditableForm {
            key: key.to_owned(),
        }),
        _ => Ok(()),
    }
}

fn rebuild(line: &str, at: usize, new: &str, tail: &str, newline: &str) -> String {
    let ending = if line.ends_with('\n') { newline } else { "" };
    format!("{}{}{tail}{ending}", &line[..at], scalar(new))
}

/// `value` as a YAML scalar: plain when that reads back as the same string, else quoted.
fn scalar(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/-@+".contains(c) || c == ':')
        && value
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
        && !value.contains(": ")
        && !value.ends_with(':')
        && matches!(serde_norway::from_str::<Yaml>(value), Ok(Yaml::String(ref s)) if s == value);
    if plain {
        value.to_owned()
    } else {
        serde_json::to_string(value).unwrap_or_default()
    }
}

/// The edited text must parse to the original document with only those keys set.
fn verify(
    original: &str,
    edited: &str,
    section: &str,
    values: &[(&str, &str)],
) -> Result<(), ModelEditError> {
    let parse = |text: &str| -> Result<Yaml, ModelEditError> {
        if text.trim().is_empty() {
            return Ok(Yaml::Mapping(Mapping::new()));
        }
        serde_norway::from_str(text).map_err(ModelEditError::InvalidYaml)
    };
    let mut expected = parse(original)?;
    let got = parse(edited).map_err(|_| ModelEditError::EditBreaksYaml)?;
    let root = expected
        .as_mapping_mut()
        .ok_or(ModelEditError::NotAMapping)?;
    let model = Yaml::String(section.into());
    let mut block = match root.get(&model) {
        Some(Yaml::Mapping(map)) => map.clone(),
        Some(Yaml::String(name)) => {
            let mut map = Mapping::new();
            map.insert(Yaml::String("default".into()), Yaml::String(name.clone()));
            map
        }
        _ => Mapping::new(),
    };
    for (key, value) in values {
        block.insert(Yaml::String((*key).into()), Yaml::String((*value).into()));
    }
    // A scalar `model:` edited in place stays a scalar.
    let scalar_kept = matches!(got.get(section), Some(Yaml::String(_)));
    let wanted = if scalar_kept && values.len() == 1 {
        Yaml::String(values[0].1.into())
    } else {
        Yaml::Mapping(block)
    };
    root.insert(model, wanted);
    if expected == got {
        Ok(())
    } else {
        let key = values.first().map_or("", |(key, _)| key);
        Err(ModelEditError::UnsafeLayout {
            key: format!("{section}.{key}"),
        })
    }
}

#[cfg(test)]
#[path = "model_edit_tests.rs"]
mod tests;

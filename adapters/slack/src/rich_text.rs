//! Text Slack keeps out of a message's `text` field: quoted and forwarded content inside
//! `rich_text` blocks, and link previews in `attachments`. Ported from the reference's
//! `_extract_text_from_slack_blocks` and its unfurl loop, so the agent sees what the user
//! sees.

use serde_json::Value;

fn s<'v>(value: &'v Value, field: &str) -> &'v str {
    value.get(field).and_then(Value::as_str).unwrap_or("")
}

fn items(value: &Value, field: &str) -> Vec<Value> {
    value
        .get(field)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn inline(elements: &[Value]) -> String {
    let mut out = String::new();
    for el in elements {
        match s(el, "type") {
            "text" => out.push_str(s(el, "text")),
            "link" => {
                let url = s(el, "url");
                let text = Some(s(el, "text")).filter(|t| !t.is_empty()).unwrap_or(url);
                out.push_str(&format!("{text} ({url})"));
            }
            "channel" => out.push_str(&format!("<#{}>", s(el, "channel_id"))),
            "user" => out.push_str(&format!("<@{}>", s(el, "user_id"))),
            "usergroup" => out.push_str(&format!("<!subteam^{}>", s(el, "usergroup_id"))),
            "emoji" => out.push_str(&format!(":{}:", s(el, "name"))),
            "broadcast" => {
                let range = Some(s(el, "range"))
                    .filter(|r| !r.is_empty())
                    .unwrap_or("here");
                out.push_str(&format!("<!{range}>"));
            }
            "date" => out.push_str(s(el, "fallback")),
            _ => {}
        }
    }
    out
}

struct Lines(Vec<String>);

impl Lines {
    fn push(&mut self, text: &str, depth: usize, bullet: &str) {
        if text.trim().is_empty() {
            return;
        }
        let prefix = if depth > 0 {
            format!("{} ", ">".repeat(depth))
        } else {
            String::new()
        };
        self.0
            .push(format!("{prefix}{bullet}{text}").trim_end().to_owned());
    }

    fn walk(&mut self, elements: &[Value], depth: usize, bullet: &str) {
        for elem in elements {
            match s(elem, "type") {
                "rich_text_section" => self.push(&inline(&items(elem, "elements")), depth, bullet),
                "rich_text_quote" => self.walk(&items(elem, "elements"), depth + 1, ""),
                "rich_text_list" => {
                    let bulleted = s(elem, "style") == "bullet";
                    for (i, item) in items(elem, "elements").iter().enumerate() {
                        let bullet = if bulleted {
                            "• ".to_owned()
                        } else {
                            format!("{}. ", i + 1)
                        };
                        self.walk(std::slice::from_ref(item), depth, &bullet);
                    }
                }
                "rich_text_preformatted" => {
                    let code: Vec<String> = items(elem, "elements")
                        .iter()
                        .map(|child| {
                            if s(child, "type") == "rich_text_section" {
                                inline(&items(child, "elements"))
                            } else {
                                inline(std::slice::from_ref(child))
                            }
                        })
                        .filter(|line| !line.is_empty())
                        .collect();
                    if !code.is_empty() {
                        let block = format!("```{}\n{}\n```", s(elem, "language"), code.join("\n"));
                        self.push(&block, depth, bullet);
                    }
                }
                _ => {
                    let rendered = inline(std::slice::from_ref(elem));
                    self.push(&rendered, depth, bullet);
                }
            }
        }
    }
}

/// Readable lines of every `rich_text` block (quotes as `> `, lists, code fences).
pub fn blocks_text(blocks: &[Value]) -> String {
    let mut lines = Lines(Vec::new());
    for block in blocks.iter().filter(|b| s(b, "type") == "rich_text") {
        lines.walk(&items(block, "elements"), 0, "");
    }
    lines.0.join("\n")
}

/// Link previews (`attachments`) as `📎 [title](url)` sections, skipping message unfurls
/// and previews whose text the message already shows.
pub fn unfurls(attachments: &[Value], text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    for att in attachments {
        if att.get("is_msg_unfurl").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let title = s(att, "title");
        let url = Some(s(att, "title_link"))
            .filter(|u| !u.is_empty())
            .unwrap_or(s(att, "from_url"));
        let header = match (title.is_empty(), url.is_empty()) {
            (false, false) => Some(format!("📎 [{title}]({url})")),
            (false, true) => Some(format!("📎 {title}")),
            (true, false) => Some(format!("📎 {url}")),
            (true, true) => None,
        };
        let body = Some(s(att, "text"))
            .filter(|t| !t.is_empty())
            .unwrap_or(s(att, "fallback"))
            .trim();
        let body = if body.chars().count() > 500 {
            format!("{}...", body.chars().take(497).collect::<String>())
        } else {
            body.to_owned()
        };
        let mut section = match (header, body.is_empty()) {
            (Some(header), false) => format!("{header}\n   {body}"),
            (Some(header), true) => header,
            (None, false) => format!("📎 {body}"),
            (None, true) => continue,
        };
        if text.contains(&section) {
            continue;
        }
        let footer = s(att, "footer");
        if !footer.is_empty() {
            section.push_str(&format!("\n   _{footer}_"));
        }
        parts.push(section);
    }
    parts
}

/// The message text with quoted block content and link previews appended, as the
/// reference builds it.
pub fn full_text(text: &str, event: &Value) -> String {
    let mut text = text.to_owned();
    let blocks = items(event, "blocks");
    let quoted = blocks_text(&blocks);
    let quoted = quoted.trim();
    if !quoted.is_empty() && !text.trim().contains(quoted) {
        text = format!("{}\n{quoted}", text.trim()).trim().to_owned();
    }
    let previews = unfurls(&items(event, "attachments"), &text);
    if !previews.is_empty() {
        text = format!("{}\n\n{}", text.trim(), previews.join("\n\n"))
            .trim()
            .to_owned();
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn forwarded_quotes_lists_and_code_are_kept() {
        let event = json!({"blocks": [{"type": "rich_text", "elements": [
            {"type": "rich_text_section", "elements": [{"type": "text", "text": "look at this"}]},
            {"type": "rich_text_quote", "elements": [
                {"type": "text", "text": "quoted by "}, {"type": "user", "user_id": "U9"}]},
            {"type": "rich_text_list", "style": "ordered", "elements": [
                {"type": "rich_text_section", "elements": [{"type": "text", "text": "one"}]},
                {"type": "rich_text_section", "elements": [
                    {"type": "link", "url": "https://x.io", "text": "two"}]}]},
            {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": "ls -la"}]},
        ]}]});
        assert_eq!(
            full_text("look at this", &event),
            "look at this\nlook at this\n> quoted by\n> <@U9>\n1. one\n2. two (https://x.io)\n```\nls -la\n```"
        );
        // Blocks that only repeat the text add nothing.
        let plain = json!({"blocks": [{"type": "rich_text", "elements": [
            {"type": "rich_text_section", "elements": [{"type": "text", "text": "hi"}]}]}]});
        assert_eq!(full_text("hi", &plain), "hi");
    }

    #[test]
    fn link_previews_are_appended_once() {
        let event = json!({"attachments": [
            {"title": "Spec", "title_link": "https://n.so/spec", "text": "The plan", "footer": "Notion"},
            {"is_msg_unfurl": true, "text": "our own message"},
            {"fallback": "just a fallback"},
        ]});
        assert_eq!(
            full_text("see https://n.so/spec", &event),
            "see https://n.so/spec\n\n📎 [Spec](https://n.so/spec)\n   The plan\n   _Notion_\n\n📎 just a fallback"
        );
    }
}

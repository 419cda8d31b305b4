//! Where a job's output goes: the `deliver` value (`local`, `origin`, `all`, a platform name
//! for its home channel, or `platform:chat_id[:thread_id]`, comma-separated) resolved to
//! concrete chats as the reference resolves them, and checked when a job is created.

use serde_json::Value;

/// The platforms the reference can deliver to (its `_KNOWN_DELIVERY_PLATFORMS`).
pub const KNOWN_PLATFORMS: &[&str] = &[
    "telegram",
    "discord",
    "slack",
    "whatsapp",
    "signal",
    "matrix",
    "mattermost",
    "homeassistant",
    "dingtalk",
    "feishu",
    "wecom",
    "wecom_callback",
    "weixin",
    "sms",
    "email",
    "webhook",
    "bluebubbles",
    "qqbot",
    "yuanbao",
];

/// One chat to deliver to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub platform: String,
    pub chat_id: String,
    pub thread_id: Option<String>,
}

/// Looks up a platform's configured home channel: `(chat_id, thread_id)`.
pub type HomeLookup<'a> = &'a dyn Fn(&str) -> Option<(String, Option<String>)>;

fn value_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn from_origin(origin: Option<&Value>) -> Option<Target> {
    let origin = origin?;
    Some(Target {
        platform: value_text(origin.get("platform"))?,
        chat_id: value_text(origin.get("chat_id"))?,
        thread_id: value_text(origin.get("thread_id")),
    })
}

/// A `deliver` value a user gave that names no place a job can deliver to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error(
        "deliver \"origin\" needs a chat to deliver back to; this job was not created from one (use local, a platform name, or platform:chat_id)"
    )]
    NoOrigin,
    #[error(
        "deliver target {part:?}: {platform:?} is not a platform (expected local, origin, all, one of {}, or platform:chat_id[:thread_id])",
        KNOWN_PLATFORMS.join(", ")
    )]
    UnknownPlatform { part: String, platform: String },
    #[error("deliver target {part:?} has no chat id after the colon")]
    MissingChatId { part: String },
}

/// Checks a `deliver` value a user gave; the error names the part that is wrong.
pub fn validate(deliver: &str, has_origin: bool) -> Result<(), TargetError> {
    for part in deliver.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let lower = part.to_lowercase();
        if matches!(lower.as_str(), "local" | "all") {
            continue;
        }
        if lower == "origin" {
            if !has_origin {
                return Err(TargetError::NoOrigin);
            }
            continue;
        }
        let (platform, rest) = match part.split_once(':') {
            Some((platform, rest)) => (platform.to_lowercase(), Some(rest)),
            None => (lower.clone(), None),
        };
        if !KNOWN_PLATFORMS.contains(&platform.as_str()) {
            return Err(TargetError::UnknownPlatform {
                part: part.to_owned(),
                platform,
            });
        }
        if let Some(rest) = rest
            && rest
                .split(':')
                .next()
                .is_none_or(|chat| chat.trim().is_empty())
        {
            return Err(TargetError::MissingChatId {
                part: part.to_owned(),
            });
        }
    }
    Ok(())
}

/// The chats a job delivers to, duplicates removed. `running` lists the platforms `all`
/// expands to (those with a home channel).
pub fn resolve(
    deliver: &str,
    origin: Option<&Value>,
    running: &[&str],
    home: HomeLookup<'_>,
) -> Vec<Target> {
    let origin = from_origin(origin);
    let mut parts: Vec<String> = Vec::new();
    for part in deliver.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if part.eq_ignore_ascii_case("all") {
            parts.extend(
                running
                    .iter()
                    .filter(|p| home(p).is_some())
                    .map(|p| (*p).to_owned()),
            );
        } else {
            parts.push(part.to_owned());
        }
    }
    let mut targets: Vec<Target> = Vec::new();
    for part in parts {
        let target = resolve_one(&part, origin.as_ref(), running, home);
        if let Some(target) = target
            && !targets.contains(&target)
        {
            targets.push(target);
        }
    }
    targets
}

fn home_target(platform: &str, home: HomeLookup<'_>) -> Option<Target> {
    let (chat_id, thread_id) = home(platform)?;
    Some(Target {
        platform: platform.to_owned(),
        chat_id,
        thread_id,
    })
}

fn resolve_one(
    part: &str,
    origin: Option<&Target>,
    running: &[&str],
    home: HomeLookup<'_>,
) -> Option<Target> {
    let lower = part.to_lowercase();
    match lower.as_str() {
        "local" => None,
        // No origin (a job made from the shell): the first home channel, as the reference.
        "origin" => origin
            .cloned()
            .or_else(|| running.iter().find_map(|p| home_target(p, home))),
        _ => {
            if let Some((platform, rest)) = part.split_once(':') {
                let mut pieces = rest.splitn(2, ':');
                let chat_id = pieces.next()?.trim().to_owned();
                let thread_id = pieces
                    .next()
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty());
                return (!chat_id.is_empty()).then(|| Target {
                    platform: platform.to_lowercase(),
                    chat_id,
                    thread_id,
                });
            }
            if let Some(origin) = origin.filter(|o| o.platform == lower) {
                return Some(origin.clone());
            }
            home_target(&lower, home)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn home(platform: &str) -> Option<(String, Option<String>)> {
        (platform == "telegram").then(|| ("-100".to_owned(), Some("7".to_owned())))
    }

    #[test]
    fn targets_resolve_like_the_reference() {
        let origin = json!({"platform": "slack", "chat_id": "C1", "thread_id": "1.2"});
        let running = ["telegram", "slack"];
        let t = resolve("origin", Some(&origin), &running, &home);
        assert_eq!(
            t,
            vec![Target {
                platform: "slack".into(),
                chat_id: "C1".into(),
                thread_id: Some("1.2".into())
            }]
        );
        let t = resolve("telegram, discord:55:9,local", None, &running, &home);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].chat_id, "-100");
        assert_eq!(
            t[1],
            Target {
                platform: "discord".into(),
                chat_id: "55".into(),
                thread_id: Some("9".into())
            }
        );
        // Without an origin, "origin" falls back to a home channel; duplicates collapse.
        assert_eq!(
            resolve("origin,telegram,all", None, &running, &home).len(),
            1
        );
        assert!(resolve("local", Some(&origin), &running, &home).is_empty());
    }

    #[test]
    fn bad_targets_are_refused_with_the_reason() {
        assert!(validate("telegram:-100:7", false).is_ok());
        assert!(validate("origin", true).is_ok());
        assert!(
            validate("origin", false)
                .unwrap_err()
                .to_string()
                .contains("origin")
        );
        assert!(
            validate("myspace", false)
                .unwrap_err()
                .to_string()
                .contains("\"myspace\" is not a platform")
        );
        assert!(
            validate("telegram:", false)
                .unwrap_err()
                .to_string()
                .contains("no chat id")
        );
    }
}

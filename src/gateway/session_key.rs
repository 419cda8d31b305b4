//! Session keys, exactly as Hermes builds them: `agent:main:<platform>:dm:<chat>[:<thread>]`
//! for DMs, `agent:main:<platform>:<chat_type>[:<chat>][:<thread>][:<participant>]` otherwise.

use hermes_adapter::{ChatType, SessionSource};

/// The per-user/per-thread sharing rules (`group_sessions_per_user`,
/// `thread_sessions_per_user`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyPolicy {
    pub group_sessions_per_user: bool,
    pub thread_sessions_per_user: bool,
}

impl Default for KeyPolicy {
    fn default() -> Self {
        Self {
            group_sessions_per_user: true,
            thread_sessions_per_user: false,
        }
    }
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

/// Builds the session key for `source`; `profile` is `None` for the default namespace.
pub fn build_session_key(
    source: &SessionSource,
    policy: KeyPolicy,
    profile: Option<&str>,
) -> String {
    let namespace = format!("agent:{}", profile.unwrap_or("main"));
    let participant = non_empty(&source.user_id_alt).or(non_empty(&source.user_id));
    let thread = non_empty(&source.thread_id);
    let mut parts = vec![namespace, source.platform.clone()];
    if source.chat_type == ChatType::Dm {
        parts.push("dm".into());
        let chat = Some(source.chat_id.as_str())
            .filter(|c| !c.is_empty())
            .or(participant);
        parts.extend(chat.map(str::to_owned));
        parts.extend(thread.map(str::to_owned));
        return parts.join(":");
    }
    parts.push(source.chat_type.as_str().into());
    if !source.chat_id.is_empty() {
        parts.push(source.chat_id.clone());
    }
    parts.extend(thread.map(str::to_owned));
    let per_user =
        policy.group_sessions_per_user && (thread.is_none() || policy.thread_sessions_per_user);
    if per_user {
        parts.extend(participant.map(str::to_owned));
    }
    parts.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(
        platform: &str,
        chat_type: ChatType,
        chat: &str,
        thread: Option<&str>,
    ) -> SessionSource {
        let mut s = SessionSource::dm(platform, chat, "42");
        s.chat_type = chat_type;
        s.thread_id = thread.map(str::to_owned);
        s
    }

    #[test]
    fn reproduces_the_verified_hermes_keys() {
        let default = KeyPolicy::default();
        let shared = KeyPolicy {
            group_sessions_per_user: false,
            ..default
        };
        let per_thread = KeyPolicy {
            thread_sessions_per_user: true,
            ..default
        };
        let cases = [
            (
                source("telegram", ChatType::Dm, "42", None),
                default,
                None,
                "agent:main:telegram:dm:42",
            ),
            (
                source("telegram", ChatType::Dm, "42", Some("7")),
                default,
                None,
                "agent:main:telegram:dm:42:7",
            ),
            (
                source("telegram", ChatType::Group, "-1001", None),
                default,
                None,
                "agent:main:telegram:group:-1001:42",
            ),
            (
                source("telegram", ChatType::Group, "-1001", None),
                shared,
                None,
                "agent:main:telegram:group:-1001",
            ),
            (
                source("telegram", ChatType::Group, "-1001", Some("5")),
                default,
                None,
                "agent:main:telegram:group:-1001:5",
            ),
            (
                source("telegram", ChatType::Group, "-1001", Some("5")),
                per_thread,
                None,
                "agent:main:telegram:group:-1001:5:42",
            ),
            (
                source("slack", ChatType::Group, "C1", Some("1700.1")),
                default,
                None,
                "agent:main:slack:group:C1:1700.1",
            ),
            (
                source("telegram", ChatType::Dm, "42", None),
                default,
                Some("coder"),
                "agent:coder:telegram:dm:42",
            ),
        ];
        for (src, policy, profile, expected) in cases {
            assert_eq!(build_session_key(&src, policy, profile), expected);
        }
        let mut thread = source("discord", ChatType::Thread, "C1", Some("T9"));
        thread.user_id = Some("u".into());
        assert_eq!(
            build_session_key(&thread, default, None),
            "agent:main:discord:thread:C1:T9"
        );
        let mut api = source("api_server", ChatType::Dm, "", None);
        api.user_id = None;
        assert_eq!(
            build_session_key(&api, default, None),
            "agent:main:api_server:dm"
        );
    }
}

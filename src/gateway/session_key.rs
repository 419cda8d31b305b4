//! Session keys, as Hermes builds them: `agent:main:<platform>:dm:<chat>[:<thread>]` for
//! DMs, `agent:main:<platform>:<chat_type>[:<chat>][:<thread>][:<participant>]` otherwise.
//! Hermes's participant is the alternative id when there is one. Where that id is the
//! account's stable id (Signal's ACI uuid, which stays when the phone number changes) we do
//! the same. Where it is a name (the Telegram username, which can be given up and taken by
//! someone else, who would then inherit the group session) the participant is the stable
//! user id instead. Rows stored under such a name key stay reachable:
//! [`legacy_session_key`] names the old key, and the router moves its entry to the new key
//! when the entry's recorded user id is the sender's ([`same_person`]).

use hermes_adapter::{ChatType, MessageEvent, SessionSource};

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

/// The id a group participant is keyed by: see the module comment. The alternative id
/// keys them where the adapter vouches that it is the account's stable id
/// (`SessionSource::user_id_alt_is_stable`; Hermes's `build_session_key` takes
/// `user_id_alt or user_id`).
fn participant(source: &SessionSource) -> Option<&str> {
    source
        .user_id_alt_is_stable
        .then(|| non_empty(&source.user_id_alt))
        .flatten()
        .or(non_empty(&source.user_id))
}

/// Builds the session key for `source`; `profile` is `None` for the default namespace.
pub fn build_session_key(
    source: &SessionSource,
    policy: KeyPolicy,
    profile: Option<&str>,
) -> String {
    key_with(source, policy, profile, participant(source))
}

/// The session key `event` runs under: a `/background` task's own key
/// (`bg:<platform>:<task id>`, so it never shares the chat's session, slot or history), else
/// [`build_session_key`] of its source.
pub fn event_session_key(event: &MessageEvent, policy: KeyPolicy) -> String {
    match &event.background {
        Some(tag) => format!("bg:{}:{}", event.source.platform, tag.task_id),
        None => build_session_key(&event.source, policy, None),
    }
}

/// The key Hermes (and hermesd before) gave `source`, with the alternative id (the Telegram
/// username) as participant; `None` when it is the same as [`build_session_key`]'s (always
/// so where the alternative id is the stable one).
pub fn legacy_session_key(
    source: &SessionSource,
    policy: KeyPolicy,
    profile: Option<&str>,
) -> Option<String> {
    let alt = non_empty(&source.user_id_alt)?;
    let legacy = key_with(source, policy, profile, Some(alt));
    (legacy != build_session_key(source, policy, profile)).then_some(legacy)
}

/// Whether a routing entry's stored `origin` was recorded for the same person as `source`
/// (same stable user id): only then may a session under a legacy key be taken over.
pub fn same_person(origin: Option<&serde_json::Value>, source: &SessionSource) -> bool {
    let recorded = origin
        .and_then(|o| o.get("user_id"))
        .and_then(|v| match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .filter(|id| !id.is_empty());
    recorded.is_some() && recorded.as_deref() == non_empty(&source.user_id)
}

fn key_with(
    source: &SessionSource,
    policy: KeyPolicy,
    profile: Option<&str>,
    participant: Option<&str>,
) -> String {
    let namespace = format!("agent:{}", profile.unwrap_or("main"));
    let participant = participant.or(non_empty(&source.user_id));
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

    /// Signal events as the adapter decodes them get Hermes' keys: a DM by the sender's
    /// number, a group as `group:<id>` with the sender's uuid as participant (the number only
    /// when signal-cli sends no uuid). The uuid is the stable id, so there is no legacy key.
    #[test]
    fn signal_events_are_keyed_like_hermes() {
        let env: std::collections::BTreeMap<String, String> = [
            ("SIGNAL_HTTP_URL", "http://127.0.0.1:1"),
            ("SIGNAL_ACCOUNT", "+10"),
            ("SIGNAL_GROUP_ALLOWED_USERS", "*"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let settings = hermes_signal::Settings::from_config(&Default::default(), &env).unwrap();
        let decode = |data: serde_json::Value| {
            let envelope = serde_json::json!({"envelope": {"sourceNumber": "+155", "sourceUuid": "u-9",
                "timestamp": 5, "dataMessage": data}});
            match hermes_signal::envelope::decode(&envelope.to_string(), &settings) {
                Ok(hermes_signal::envelope::Decoded::Message(event)) => event.source,
                other => panic!("{other:?}"),
            }
        };
        let default = KeyPolicy::default();
        let dm = decode(serde_json::json!({"message": "hi"}));
        assert_eq!(
            build_session_key(&dm, default, None),
            "agent:main:signal:dm:+155"
        );
        let group = decode(serde_json::json!({"message": "hi", "groupInfo": {"groupId": "Zz=="}}));
        assert_eq!(
            build_session_key(&group, default, None),
            "agent:main:signal:group:group:Zz==:u-9"
        );
        assert_eq!(legacy_session_key(&group, default, None), None);
        let mut numbered = group.clone();
        numbered.user_id_alt = None;
        assert_eq!(
            build_session_key(&numbered, default, None),
            "agent:main:signal:group:group:Zz==:+155"
        );
        let shared = KeyPolicy {
            group_sessions_per_user: false,
            ..default
        };
        assert_eq!(
            build_session_key(&group, shared, None),
            "agent:main:signal:group:group:Zz=="
        );
    }

    /// The adapter, not a platform list in the core, says whether the alternative id is a
    /// stable one; an event journaled before the flag existed reads as not vouched for.
    #[test]
    fn the_alternative_id_keys_a_member_only_when_the_adapter_vouches_for_it() {
        let mut member = source("matrix", ChatType::Group, "!room", None);
        member.user_id = Some("@a:hs".into());
        member.user_id_alt = Some("device-stable-a".into());
        let default = KeyPolicy::default();
        assert_eq!(
            build_session_key(&member, default, None),
            "agent:main:matrix:group:!room:@a:hs"
        );
        member.user_id_alt_is_stable = true;
        assert_eq!(
            build_session_key(&member, default, None),
            "agent:main:matrix:group:!room:device-stable-a"
        );
        let mut journaled = serde_json::to_value(&member).unwrap();
        journaled
            .as_object_mut()
            .unwrap()
            .remove("user_id_alt_is_stable");
        let read: SessionSource = serde_json::from_value(journaled).unwrap();
        assert!(!read.user_id_alt_is_stable);
    }

    #[test]
    fn the_participant_is_the_stable_id_never_the_username() {
        let mut member = source("telegram", ChatType::Group, "-1001", None);
        member.user_id = Some("333".into());
        member.user_id_alt = Some("alice".into());
        let default = KeyPolicy::default();
        assert_eq!(
            build_session_key(&member, default, None),
            "agent:main:telegram:group:-1001:333"
        );
        assert_eq!(
            legacy_session_key(&member, default, None).as_deref(),
            Some("agent:main:telegram:group:-1001:alice")
        );
        member.user_id_alt = None;
        assert_eq!(legacy_session_key(&member, default, None), None);
        // DMs are keyed by the chat: nothing changed, nothing to move.
        let mut dm = source("telegram", ChatType::Dm, "42", None);
        dm.user_id_alt = Some("alice".into());
        assert_eq!(legacy_session_key(&dm, default, None), None);
    }

    #[test]
    fn only_the_same_stable_id_takes_over_a_legacy_row() {
        let mut newcomer = source("telegram", ChatType::Group, "-1001", None);
        newcomer.user_id = Some("999".into());
        newcomer.user_id_alt = Some("alice".into());
        let origin = serde_json::json!({"user_id": "333", "user_id_alt": "alice"});
        assert!(
            !same_person(Some(&origin), &newcomer),
            "a recycled username"
        );
        newcomer.user_id = Some("333".into());
        assert!(same_person(Some(&origin), &newcomer));
        assert!(!same_person(None, &newcomer));
        assert!(!same_person(Some(&serde_json::json!({})), &newcomer));
    }
}

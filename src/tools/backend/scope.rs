//! Whose sandbox a tool call uses (`terminal.sandbox_scope`): one for everyone, one per chat,
//! or one per person. A scope's id names its directory or container, so it is a short hash:
//! the chat and user ids never appear in a path, a container name or a log line.

use sha2::{Digest, Sha256};

use crate::config::SandboxScope;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every turn shares one backend (Hermes's behaviour; the operator's own turns always).
    Shared,
    Chat {
        platform: String,
        chat_id: String,
    },
    User {
        platform: String,
        user_id: String,
    },
}

impl Scope {
    /// The scope `setting` gives a turn from `chat_id` on `platform` by `user_id`. Turns
    /// without a chat (the CLI, the operator's scheduled jobs: an empty platform) share one;
    /// a person-scoped turn without a user id (an HTTP API client) gets its chat's.
    pub fn for_turn(
        setting: SandboxScope,
        platform: &str,
        chat_id: &str,
        user_id: Option<&str>,
    ) -> Scope {
        if platform.is_empty() || setting == SandboxScope::Shared {
            return Scope::Shared;
        }
        match (setting, user_id) {
            (SandboxScope::User, Some(user_id)) if !user_id.is_empty() => Scope::User {
                platform: platform.to_owned(),
                user_id: user_id.to_owned(),
            },
            _ => Scope::Chat {
                platform: platform.to_owned(),
                chat_id: chat_id.to_owned(),
            },
        }
    }

    /// A stable id safe in file and container names: `shared`, or `chat-`/`user-` and 16 hex
    /// digits of a SHA-256 over the platform and id.
    pub fn id(&self) -> String {
        let (prefix, platform, id) = match self {
            Scope::Shared => return "shared".to_owned(),
            Scope::Chat { platform, chat_id } => ("chat", platform, chat_id),
            Scope::User { platform, user_id } => ("user", platform, user_id),
        };
        let digest = Sha256::new()
            .chain_update(prefix)
            .chain_update([0])
            .chain_update(platform)
            .chain_update([0])
            .chain_update(id)
            .finalize();
        format!("{prefix}-{}", hex::encode(&digest[..8]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Caller = (&'static str, &'static str, Option<&'static str>);

    fn caller(platform: &'static str, chat: &'static str, user: Option<&'static str>) -> Caller {
        (platform, chat, user)
    }

    fn scope_of(setting: SandboxScope, (platform, chat, user): &Caller) -> Scope {
        Scope::for_turn(setting, platform, chat, *user)
    }

    #[test]
    fn scopes_follow_the_setting_and_never_show_ids() {
        let alice = caller("telegram", "-100", Some("42"));
        let bob = caller("telegram", "-100", Some("43"));
        assert_eq!(scope_of(SandboxScope::Shared, &alice), Scope::Shared);
        let chat = scope_of(SandboxScope::Chat, &alice);
        assert_eq!(chat, scope_of(SandboxScope::Chat, &bob));
        let (a, b) = (
            scope_of(SandboxScope::User, &alice),
            scope_of(SandboxScope::User, &bob),
        );
        assert_ne!(a.id(), b.id());
        assert_ne!(a.id(), chat.id());
        for id in [a.id(), b.id(), chat.id()] {
            let (prefix, digits) = id.split_once('-').expect("prefixed");
            assert!(["chat", "user"].contains(&prefix), "{id}");
            assert_eq!(digits.len(), 16, "{id}");
            assert!(digits.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        }
        assert_eq!(scope_of(SandboxScope::User, &("", "", None)), Scope::Shared);
        let api = caller("api_server", "conv-1", None);
        assert!(matches!(
            scope_of(SandboxScope::User, &api),
            Scope::Chat { .. }
        ));
    }
}

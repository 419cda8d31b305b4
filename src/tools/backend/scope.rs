//! Whose sandbox a tool call uses (`terminal.sandbox_scope`): one for everyone, one per chat,
//! or one per person. A scope's id names its directory or container, so it is a short hash:
//! the chat and user ids never appear in a path, a container name or a log line.

use sha2::{Digest, Sha256};

use crate::config::SandboxScope;
use crate::tools::context::Caller;

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
    /// The scope `setting` gives a turn acting for `caller`. Turns without a chat (the CLI,
    /// the operator's scheduled jobs) share one; a person-scoped turn without a user id (an
    /// HTTP API client) gets its chat's.
    pub fn for_caller(setting: SandboxScope, caller: &Caller) -> Scope {
        if caller.platform.is_empty() || setting == SandboxScope::Shared {
            return Scope::Shared;
        }
        let chat = || Scope::Chat {
            platform: caller.platform.clone(),
            chat_id: caller.chat_id.clone(),
        };
        match (setting, &caller.user_id) {
            (SandboxScope::User, Some(user_id)) if !user_id.is_empty() => Scope::User {
                platform: caller.platform.clone(),
                user_id: user_id.clone(),
            },
            _ => chat(),
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
    use crate::tools::context::Authority;

    fn caller(platform: &str, chat: &str, user: Option<&str>) -> Caller {
        Caller {
            authority: Authority::AllowedUser,
            platform: platform.to_owned(),
            chat_id: chat.to_owned(),
            user_id: user.map(str::to_owned),
        }
    }

    #[test]
    fn scopes_follow_the_setting_and_never_show_ids() {
        let alice = caller("telegram", "-100", Some("42"));
        let bob = caller("telegram", "-100", Some("43"));
        assert_eq!(
            Scope::for_caller(SandboxScope::Shared, &alice),
            Scope::Shared
        );
        let chat = Scope::for_caller(SandboxScope::Chat, &alice);
        assert_eq!(chat, Scope::for_caller(SandboxScope::Chat, &bob));
        let (a, b) = (
            Scope::for_caller(SandboxScope::User, &alice),
            Scope::for_caller(SandboxScope::User, &bob),
        );
        assert_ne!(a.id(), b.id());
        assert_ne!(a.id(), chat.id());
        for id in [a.id(), b.id(), chat.id()] {
            let (prefix, digits) = id.split_once('-').expect("prefixed");
            assert!(["chat", "user"].contains(&prefix), "{id}");
            assert_eq!(digits.len(), 16, "{id}");
            assert!(digits.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        }
        assert_eq!(
            Scope::for_caller(SandboxScope::User, &Caller::operator()),
            Scope::Shared
        );
        let api = caller("api_server", "conv-1", None);
        assert!(matches!(
            Scope::for_caller(SandboxScope::User, &api),
            Scope::Chat { .. }
        ));
    }
}

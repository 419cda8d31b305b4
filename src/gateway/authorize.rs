//! Who may talk to the agent, decided in the reference's order (`_is_user_authorized`), and
//! what an unauthorized DM gets (`_get_unauthorized_dm_behavior`). Deny is the default: an
//! event this denies must never reach an agent or create a session; the router drops it
//! and, for a DM on a pairing platform, sends [`unauthorized_reply`]'s text instead.

#[cfg(test)]
mod authority_tests;
mod policy;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::sync::Once;

use hermes_adapter::{ChatType, SessionSource};

pub use crate::tools::context::Authority;
pub use policy::{AuthPolicy, PlatformAccess};

use super::pairing::{PairingCode, PairingError, PairingRequest, PairingStore};
use crate::config::UnauthorizedDmBehavior;

/// What an unauthorized DM gets: a pairing code, or silence.
pub type DmBehavior = UnauthorizedDmBehavior;

/// Sent when no code can be issued (too many pending, or the platform is locked out).
pub const PAIRING_TOO_MANY_TEXT: &str =
    "No pairing code can be issued right now (too many requests). Try again later.";

/// The reply carrying a freshly issued code, with the command that approves it.
pub fn pairing_code_text(platform: &str, code: &PairingCode) -> String {
    let code = code.as_str();
    format!(
        "I don't know you yet. Your pairing code is `{code}`.\n\n\
         To let you in, the owner of this bot runs:\n\
         `hermesd pairing approve {platform} {code}`"
    )
}

/// Platforms whose events are system-generated or authenticated by the adapter itself
/// (Home Assistant's token): rule 1.
const SELF_AUTHENTICATED_PLATFORMS: &[&str] = &["homeassistant"];

fn is_group_like(chat_type: ChatType) -> bool {
    matches!(chat_type, ChatType::Group | ChatType::Forum)
}

fn lists(value: &str, list: &[String]) -> bool {
    list.iter().any(|entry| entry == value)
}

/// The one decision on an inbound sender, taken from one policy snapshot: admitted with the
/// authority a turn acts with, or refused with what (if anything) goes back to them.
#[derive(Debug)]
pub enum Admission {
    Admitted(Authority),
    /// [`unauthorized_reply`]'s answer for the refused sender.
    Refused(Result<Option<String>, PairingError>),
}

/// Decides on `source` once: [`authority`], and only when that refuses,
/// [`unauthorized_reply`] (which may issue a pairing code, so `now` matters).
pub fn admit(
    source: &SessionSource,
    policy: &AuthPolicy,
    pairing: &PairingStore,
    now: f64,
) -> Admission {
    match authority(source, policy, pairing) {
        Some(authority) => Admission::Admitted(authority),
        None => Admission::Refused(unauthorized_reply(source, policy, pairing, now)),
    }
}

/// Whether `source` may use the bot: [`authority`] admits them at all.
pub fn is_authorized(source: &SessionSource, policy: &AuthPolicy, pairing: &PairingStore) -> bool {
    authority(source, policy, pairing).is_some()
}

/// How far `source` is trusted, or `None` when they may not use the bot. The numbered
/// comments are the rules of the reference (spec §A.3); which of them admits the sender
/// decides the authority: a rule that names the person (an allowlist, a pairing, a role,
/// allow-all, the operator's own channels) makes an [`Authority::AllowedUser`]; one that
/// only admits the chat (an allowed group) or a bot makes an [`Authority::Guest`]. A person
/// both rules admit is an allowed user. Nothing configured means deny.
pub fn authority(
    source: &SessionSource,
    policy: &AuthPolicy,
    pairing: &PairingStore,
) -> Option<Authority> {
    // A webhook's signature proves which sender the operator configured, but what it carries
    // (a pull request's title, an alert's text) was written by anyone: it acts as a guest.
    if source.platform == hermes_adapter::WEBHOOK_PLATFORM {
        return Some(Authority::Guest);
    }
    if person_is_allowed(source, policy, pairing) {
        return Some(Authority::AllowedUser);
    }
    chat_admits_guest(source, policy).then_some(Authority::Guest)
}

/// The rules that admit a chat or a bot rather than a person (3, 4 and 10).
fn chat_admits_guest(source: &SessionSource, policy: &AuthPolicy) -> bool {
    let platform = source.platform.as_str();
    let access = policy.access(platform);
    let chat_id = source.chat_id.as_str();
    let group_chats = &access.group_allowed_chats;
    // 3. A whole group/forum/channel allowed by chat id; works without a user id. (Rule 10
    // admits the same chats for group and forum types.)
    if matches!(
        source.chat_type,
        ChatType::Group | ChatType::Forum | ChatType::Channel
    ) && !chat_id.is_empty()
        && (lists("*", group_chats) || lists(chat_id, group_chats))
    {
        return true;
    }
    // 4. Bots admitted by `{PLATFORM}_ALLOW_BOTS=mentions|all`.
    if source.is_bot && access.allow_bots {
        return true;
    }
    // 10 (legacy). Chat ids (leading '-') in TELEGRAM_GROUP_ALLOWED_USERS allow the chat; it
    // needs a user id, as the reference's rule order puts it after rule 5.
    let has_user = source.user_id.as_deref().is_some_and(|id| !id.is_empty());
    if has_user && platform == "telegram" && is_group_like(source.chat_type) && !chat_id.is_empty()
    {
        let legacy: Vec<&String> = access
            .group_allowed_users
            .iter()
            .filter(|v| v.starts_with('-'))
            .collect();
        if !legacy.is_empty() {
            warn_legacy_group_users(&legacy);
            if legacy.iter().any(|v| *v == chat_id) {
                return true;
            }
        }
    }
    false
}

/// The rules that admit the person themself (1, 2, 6, 7, 8, 9's allow-all, 11 and 12).
fn person_is_allowed(source: &SessionSource, policy: &AuthPolicy, pairing: &PairingStore) -> bool {
    let platform = source.platform.as_str();
    // 1. System-generated / signature-authenticated platforms: the operator's own channels.
    if SELF_AUTHENTICATED_PLATFORMS.contains(&platform) {
        return true;
    }
    let access = policy.access(platform);
    // 2. The adapter authenticated the caller upstream (the API server's bearer key).
    if access.authorization_is_upstream {
        return true;
    }
    // 5. Everything below needs a user.
    let Some(user_id) = source.user_id.as_deref().filter(|id| !id.is_empty()) else {
        return false;
    };
    // 6. `{PLATFORM}_ALLOW_ALL_USERS`.
    if access.allow_all_users {
        return true;
    }
    // 7. The adapter verified an allowed role (Discord `DISCORD_ALLOWED_ROLES`).
    if source.role_authorized {
        return true;
    }
    // 8. Approved through DM pairing.
    if pairing.is_approved(platform, user_id) {
        return true;
    }
    // 9. The allowlists that apply to this chat; none at all → only GATEWAY_ALLOW_ALL_USERS.
    let group = is_group_like(source.chat_type);
    let no_list: &[String] = &[];
    let group_users = if group {
        access.group_allowed_users.as_slice()
    } else {
        no_list
    };
    let group_chats = if group {
        access.group_allowed_chats.as_slice()
    } else {
        no_list
    };
    if access.allowed_users.is_empty()
        && group_users.is_empty()
        && group_chats.is_empty()
        && policy.gateway_allowed_users.is_empty()
    {
        return policy.gateway_allow_all_users;
    }
    let allowed: BTreeSet<&str> = access
        .allowed_users
        .iter()
        .chain(group_users)
        .chain(&policy.gateway_allowed_users)
        .map(String::as_str)
        .collect();
    // 11. `*` in any applicable allowlist.
    if allowed.contains("*") {
        return true;
    }
    // 12. The user id, or its part before '@'.
    allowed.contains(user_id)
        || user_id
            .split_once('@')
            .is_some_and(|(local, _)| allowed.contains(local))
}

fn warn_legacy_group_users(legacy: &[&String]) {
    static WARNED: Once = Once::new();
    WARNED.call_once(|| {
        let ids: Vec<&str> = legacy.iter().map(|v| v.as_str()).collect();
        tracing::warn!(
            chat_ids = %ids.join(","),
            "TELEGRAM_GROUP_ALLOWED_USERS lists values that look like chat IDs (negative); they \
             are used as allowed chats, as before, but belong in TELEGRAM_GROUP_ALLOWED_CHATS"
        );
    });
}

/// How an unauthorized DM on `platform` is handled, in the reference's order: the
/// platform's own `unauthorized_dm_behavior` → email never pairs → a global `ignore` → the
/// platform's `dm_policy` → any allowlist configured means ignore → pair.
pub fn unauthorized_dm_behavior(platform: &str, policy: &AuthPolicy) -> DmBehavior {
    let access = policy.access(platform);
    if let Some(explicit) = access.unauthorized_dm_behavior {
        return explicit;
    }
    if platform == "email" {
        return DmBehavior::Ignore;
    }
    if policy.unauthorized_dm_behavior != DmBehavior::Pair {
        return policy.unauthorized_dm_behavior;
    }
    match access.dm_policy.as_str() {
        "pairing" => return DmBehavior::Pair,
        "allowlist" | "disabled" => return DmBehavior::Ignore,
        _ => {}
    }
    if !access.allowed_users.is_empty()
        || !access.group_allowed_users.is_empty()
        || !access.group_allowed_chats.is_empty()
        || !policy.gateway_allowed_users.is_empty()
    {
        return DmBehavior::Ignore;
    }
    DmBehavior::Pair
}

/// What to send back for an event [`is_authorized`] denied: `Some(text)` only for a DM
/// from a known user id on a platform that pairs and outside the user's rate-limit window
/// (a code, or [`PAIRING_TOO_MANY_TEXT`]); `None` means drop silently.
pub fn unauthorized_reply(
    source: &SessionSource,
    policy: &AuthPolicy,
    pairing: &PairingStore,
    now: f64,
) -> Result<Option<String>, PairingError> {
    // An empty id cannot be approved meaningfully, so it gets no code (the reference would
    // issue one).
    let Some(user_id) = source.user_id.as_deref().filter(|id| !id.is_empty()) else {
        return Ok(None);
    };
    if source.chat_type != ChatType::Dm
        || unauthorized_dm_behavior(&source.platform, policy) != DmBehavior::Pair
    {
        return Ok(None);
    }
    let user_name = source.user_name.as_deref().unwrap_or("");
    Ok(
        match pairing.request_code(&source.platform, user_id, user_name, now)? {
            PairingRequest::Issued(code) => Some(pairing_code_text(&source.platform, &code)),
            PairingRequest::RateLimited => None,
            PairingRequest::TooManyPending | PairingRequest::LockedOut => {
                Some(PAIRING_TOO_MANY_TEXT.to_owned())
            }
        },
    )
}

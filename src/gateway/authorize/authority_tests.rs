//! Which rule admits a sender decides their authority: a person the configuration names is
//! an allowed user; someone admitted only through their chat (or as a bot) is a guest.

use std::collections::BTreeMap;

use hermes_adapter::{ChatType, SessionSource};

use super::*;
use crate::config::Config;
use crate::gateway::pairing::PairingStore;
use crate::home::HermesHome;

fn policy(pairs: &[(&str, &str)]) -> AuthPolicy {
    let env: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    AuthPolicy::from_config(&Config::default(), &env)
}

fn in_group(platform: &str, chat: &str, user: Option<&str>) -> SessionSource {
    let mut source = SessionSource::dm(platform, chat, "");
    source.chat_type = ChatType::Group;
    source.user_id = user.map(str::to_owned);
    source
}

#[test]
fn group_members_who_are_not_listed_are_guests_and_listed_people_are_allowed_users() {
    let dir = tempfile::tempdir().unwrap();
    let pairing = PairingStore::open(&HermesHome::at(dir.path())).unwrap();
    let p = policy(&[
        ("TELEGRAM_ALLOWED_USERS", "111"),
        ("TELEGRAM_GROUP_ALLOWED_CHATS", "-1001"),
    ]);
    let owner = in_group("telegram", "-1001", Some("111"));
    let member = in_group("telegram", "-1001", Some("333"));
    assert_eq!(
        authority(&owner, &p, &pairing),
        Some(Authority::AllowedUser)
    );
    assert_eq!(authority(&member, &p, &pairing), Some(Authority::Guest));
    assert_eq!(
        authority(&in_group("telegram", "-1001", None), &p, &pairing),
        Some(Authority::Guest)
    );
    assert_eq!(
        authority(&SessionSource::dm("telegram", "111", "111"), &p, &pairing),
        Some(Authority::AllowedUser)
    );
    assert_eq!(
        authority(&SessionSource::dm("telegram", "333", "333"), &p, &pairing),
        None
    );
    assert_eq!(
        authority(&in_group("telegram", "-2002", Some("333")), &p, &pairing),
        None
    );
    // A legacy chat id in the group user list admits the chat, not its members.
    let legacy = policy(&[
        ("TELEGRAM_ALLOWED_USERS", "111"),
        ("TELEGRAM_GROUP_ALLOWED_USERS", "-1001"),
    ]);
    assert_eq!(
        authority(&member, &legacy, &pairing),
        Some(Authority::Guest)
    );
    assert_eq!(
        authority(&owner, &legacy, &pairing),
        Some(Authority::AllowedUser)
    );
}

#[test]
fn pairings_roles_allow_all_and_the_operators_channels_are_allowed_users_and_bots_guests() {
    let dir = tempfile::tempdir().unwrap();
    let pairing = PairingStore::open(&HermesHome::at(dir.path())).unwrap();
    let member = in_group("discord", "c1", Some("555"));
    let everyone = policy(&[("DISCORD_ALLOW_ALL_USERS", "true")]);
    assert_eq!(
        authority(&member, &everyone, &pairing),
        Some(Authority::AllowedUser)
    );
    let mut with_role = member.clone();
    with_role.role_authorized = true;
    assert_eq!(
        authority(&with_role, &policy(&[]), &pairing),
        Some(Authority::AllowedUser)
    );
    let mut api = SessionSource::dm("api_server", "", "");
    api.user_id = None;
    assert_eq!(
        authority(&api, &policy(&[]), &pairing),
        Some(Authority::AllowedUser)
    );
    let mut bot = in_group("discord", "c1", Some("777"));
    bot.is_bot = true;
    let bots = policy(&[
        ("DISCORD_ALLOWED_USERS", "1"),
        ("DISCORD_ALLOW_BOTS", "all"),
    ]);
    assert_eq!(authority(&bot, &bots, &pairing), Some(Authority::Guest));
}

#[test]
fn discord_and_slack_channels_can_be_allowed_for_guests() {
    let dir = tempfile::tempdir().unwrap();
    let pairing = PairingStore::open(&HermesHome::at(dir.path())).unwrap();
    for (platform, chats_var, users_var) in [
        (
            "discord",
            "DISCORD_GROUP_ALLOWED_CHATS",
            "DISCORD_ALLOWED_USERS",
        ),
        ("slack", "SLACK_GROUP_ALLOWED_CHATS", "SLACK_ALLOWED_USERS"),
    ] {
        let p = policy(&[(users_var, "U1"), (chats_var, "C9")]);
        assert_eq!(
            authority(&in_group(platform, "C9", Some("U2")), &p, &pairing),
            Some(Authority::Guest),
            "{platform}"
        );
        assert_eq!(
            authority(&in_group(platform, "C9", Some("U1")), &p, &pairing),
            Some(Authority::AllowedUser),
            "{platform}"
        );
        assert_eq!(
            authority(&in_group(platform, "C8", Some("U2")), &p, &pairing),
            None,
            "{platform}"
        );
        assert_eq!(
            authority(&SessionSource::dm(platform, "D1", "U2"), &p, &pairing),
            None,
            "{platform}: the chat allowlist admits no DM"
        );
    }
}

/// `SIGNAL_GROUP_ALLOWED_CHATS` lists group ids as `SIGNAL_GROUP_ALLOWED_USERS` does (the
/// adapter's chat id is `group:<id>`): the group's members are guests, a listed user keeps
/// their rights, another group and a DM are not admitted.
#[test]
fn signal_groups_are_allowed_for_guests_by_their_id() {
    let dir = tempfile::tempdir().unwrap();
    let pairing = PairingStore::open(&HermesHome::at(dir.path())).unwrap();
    for listed in ["R3JvdXA=", "group:R3JvdXA=", "R3JvdXA=, T3RoZXI="] {
        let p = policy(&[
            ("SIGNAL_ALLOWED_USERS", "+1555"),
            ("SIGNAL_GROUP_ALLOWED_CHATS", listed),
        ]);
        let member = in_group("signal", "group:R3JvdXA=", Some("+1999"));
        assert_eq!(
            authority(&member, &p, &pairing),
            Some(Authority::Guest),
            "{listed}"
        );
        let owner = in_group("signal", "group:R3JvdXA=", Some("+1555"));
        assert_eq!(
            authority(&owner, &p, &pairing),
            Some(Authority::AllowedUser)
        );
        let elsewhere = in_group("signal", "group:QmFk", Some("+1999"));
        assert_eq!(authority(&elsewhere, &p, &pairing), None, "{listed}");
        let dm = SessionSource::dm("signal", "+1999", "+1999");
        assert_eq!(authority(&dm, &p, &pairing), None, "{listed}");
    }
}

//! Each numbered rule of the reference's authorization order, the default deny, and the
//! unauthorized-DM resolution.

use std::collections::BTreeMap;

use hermes_adapter::{ChatType, SessionSource};
use serde_json::json;

use super::*;
use crate::config::{Config, Extra};
use crate::gateway::pairing::PairingStore;
use crate::home::HermesHome;

struct Fixture {
    _dir: tempfile::TempDir,
    store: PairingStore,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = PairingStore::open(&HermesHome::at(dir.path())).unwrap();
    Fixture { _dir: dir, store }
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn policy(pairs: &[(&str, &str)]) -> AuthPolicy {
    policy_with(Config::default(), pairs)
}

fn policy_with(config: Config, pairs: &[(&str, &str)]) -> AuthPolicy {
    AuthPolicy::from_config(&config, &env(pairs))
}

fn dm(platform: &str, user: &str) -> SessionSource {
    SessionSource::dm(platform, user, user)
}

fn in_chat(platform: &str, chat_type: ChatType, chat: &str, user: Option<&str>) -> SessionSource {
    let mut source = SessionSource::dm(platform, chat, "");
    source.chat_type = chat_type;
    source.user_id = user.map(str::to_owned);
    source
}

fn extra(pairs: serde_json::Value) -> Extra {
    Extra(
        pairs
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

#[test]
fn nothing_configured_denies_everyone() {
    let f = fixture();
    let open = policy(&[]);
    for source in [
        dm("telegram", "1"),
        dm("discord", "1"),
        dm("slack", "U1"),
        dm("matrix", "1"),
        in_chat("telegram", ChatType::Group, "-100", Some("1")),
    ] {
        assert!(!is_authorized(&source, &open, &f.store), "{source:?}");
    }
}

#[test]
fn rule_1_and_2_self_and_upstream_authenticated_platforms() {
    let f = fixture();
    let p = policy(&[]);
    for platform in ["webhook", "homeassistant", "api_server"] {
        let mut source = dm(platform, "x");
        source.user_id = None;
        assert!(is_authorized(&source, &p, &f.store), "{platform}");
    }
}

#[test]
fn a_signed_webhook_is_admitted_only_as_a_guest() {
    let f = fixture();
    // Even with everyone allowed, a webhook's content never gets an allowed user's rights.
    let p = policy(&[("GATEWAY_ALLOW_ALL_USERS", "true")]);
    let source = dm("webhook", "webhook:gh:d1");
    assert_eq!(
        authority(&source, &p, &f.store),
        Some(crate::tools::context::Authority::Guest)
    );
}

#[test]
fn rule_3_group_chat_allowlist_works_without_a_user() {
    let f = fixture();
    let p = policy(&[("TELEGRAM_GROUP_ALLOWED_CHATS", "-100, -200")]);
    for chat_type in [ChatType::Group, ChatType::Forum, ChatType::Channel] {
        let source = in_chat("telegram", chat_type, "-200", None);
        assert!(is_authorized(&source, &p, &f.store), "{chat_type:?}");
    }
    assert!(!is_authorized(
        &in_chat("telegram", ChatType::Group, "-300", None),
        &p,
        &f.store
    ));
    assert!(!is_authorized(
        &in_chat("telegram", ChatType::Dm, "-100", Some("5")),
        &p,
        &f.store
    ));
    assert!(!is_authorized(
        &in_chat("discord", ChatType::Group, "-100", Some("5")),
        &p,
        &f.store
    ));
    let wildcard = policy(&[("TELEGRAM_GROUP_ALLOWED_CHATS", "*")]);
    assert!(is_authorized(
        &in_chat("telegram", ChatType::Forum, "-9", None),
        &wildcard,
        &f.store
    ));
    // The same list written in config.yaml counts as the env var does.
    let mut config = Config::default();
    config.platforms.telegram.extra = extra(json!({"group_allowed_chats": [-100]}));
    let from_yaml = policy_with(config, &[]);
    assert!(is_authorized(
        &in_chat("telegram", ChatType::Group, "-100", None),
        &from_yaml,
        &f.store
    ));
}

#[test]
fn rule_4_bots_need_allow_bots() {
    let f = fixture();
    let mut bot = in_chat("discord", ChatType::Group, "c1", None);
    bot.is_bot = true;
    assert!(!is_authorized(&bot, &policy(&[]), &f.store));
    assert!(!is_authorized(
        &bot,
        &policy(&[("DISCORD_ALLOW_BOTS", "none")]),
        &f.store
    ));
    assert!(is_authorized(
        &bot,
        &policy(&[("DISCORD_ALLOW_BOTS", "Mentions")]),
        &f.store
    ));
    assert!(is_authorized(
        &bot,
        &policy(&[("DISCORD_ALLOW_BOTS", "all")]),
        &f.store
    ));
    // Not a bot: the flag does nothing.
    bot.is_bot = false;
    assert!(!is_authorized(
        &bot,
        &policy(&[("DISCORD_ALLOW_BOTS", "all")]),
        &f.store
    ));
    // Slack reads config.yaml's allow_bots; Discord does not (as in the reference).
    let mut config = Config::default();
    config.platforms.slack.extra = extra(json!({"allow_bots": "all"}));
    config.platforms.discord.extra = extra(json!({"allow_bots": "all"}));
    let p = policy_with(config, &[]);
    let mut slack_bot = in_chat("slack", ChatType::Channel, "C1", None);
    slack_bot.is_bot = true;
    assert!(is_authorized(&slack_bot, &p, &f.store));
    let mut discord_bot = in_chat("discord", ChatType::Channel, "C1", None);
    discord_bot.is_bot = true;
    assert!(!is_authorized(&discord_bot, &p, &f.store));
}

#[test]
fn rule_5_no_user_id_is_denied_even_when_all_users_are_allowed() {
    let f = fixture();
    let p = policy(&[
        ("GATEWAY_ALLOW_ALL_USERS", "true"),
        ("TELEGRAM_ALLOW_ALL_USERS", "1"),
    ]);
    let mut source = dm("telegram", "1");
    source.user_id = None;
    assert!(!is_authorized(&source, &p, &f.store));
    source.user_id = Some(String::new());
    assert!(!is_authorized(&source, &p, &f.store));
}

#[test]
fn rule_6_platform_allow_all_uses_the_reference_truthy_values() {
    let f = fixture();
    for yes in ["true", "1", "YES"] {
        let p = policy(&[("TELEGRAM_ALLOW_ALL_USERS", yes)]);
        assert!(is_authorized(&dm("telegram", "9"), &p, &f.store), "{yes}");
        assert!(!is_authorized(&dm("discord", "9"), &p, &f.store), "{yes}");
    }
    let p = policy(&[("TELEGRAM_ALLOW_ALL_USERS", "on")]);
    assert!(!is_authorized(&dm("telegram", "9"), &p, &f.store));
    // It also beats a configured allowlist.
    let p = policy(&[
        ("SLACK_ALLOW_ALL_USERS", "yes"),
        ("GATEWAY_ALLOWED_USERS", "1"),
    ]);
    assert!(is_authorized(&dm("slack", "9"), &p, &f.store));
    let mut config = Config::default();
    config.platforms.discord.allow_all_users = true;
    assert!(is_authorized(
        &dm("discord", "9"),
        &policy_with(config, &[]),
        &f.store
    ));
}

#[test]
fn rule_7_role_authorized_sources_are_allowed() {
    let f = fixture();
    let mut source = dm("discord", "9");
    source.role_authorized = true;
    assert!(is_authorized(
        &source,
        &policy(&[("DISCORD_ALLOWED_USERS", "1")]),
        &f.store
    ));
}

#[test]
fn rule_8_paired_users_are_allowed_whatever_the_allowlist() {
    let f = fixture();
    let p = policy(&[("TELEGRAM_ALLOWED_USERS", "1")]);
    assert!(!is_authorized(&dm("telegram", "9"), &p, &f.store));
    let PairingRequest::Issued(code) = f.store.request_code("telegram", "9", "", 10.0).unwrap()
    else {
        panic!("no code")
    };
    f.store.approve("telegram", code.as_str(), 10.0).unwrap();
    assert!(is_authorized(&dm("telegram", "9"), &p, &f.store));
    assert!(is_authorized(&dm("telegram", "9"), &policy(&[]), &f.store));
    assert!(!is_authorized(&dm("discord", "9"), &policy(&[]), &f.store));
}

#[test]
fn rule_9_without_allowlists_only_gateway_allow_all_admits() {
    let f = fixture();
    let p = policy(&[("GATEWAY_ALLOW_ALL_USERS", "yes")]);
    assert!(is_authorized(&dm("matrix", "9"), &p, &f.store));
    assert!(is_authorized(&dm("telegram", "9"), &p, &f.store));
    // Any allowlist switches allow-all off: the list decides.
    let p = policy(&[
        ("GATEWAY_ALLOW_ALL_USERS", "yes"),
        ("GATEWAY_ALLOWED_USERS", "1"),
    ]);
    assert!(!is_authorized(&dm("telegram", "9"), &p, &f.store));
    assert!(is_authorized(&dm("telegram", "1"), &p, &f.store));
    // Group lists apply to groups only: in a DM they are "no allowlist".
    let p = policy(&[
        ("GATEWAY_ALLOW_ALL_USERS", "1"),
        ("TELEGRAM_GROUP_ALLOWED_USERS", "5"),
    ]);
    assert!(is_authorized(&dm("telegram", "9"), &p, &f.store));
    let group = in_chat("telegram", ChatType::Group, "-1", Some("9"));
    assert!(!is_authorized(&group, &p, &f.store));
}

#[test]
fn rule_10_group_chat_ids_and_legacy_ids_in_the_user_list() {
    let f = fixture();
    let p = policy(&[("TELEGRAM_GROUP_ALLOWED_USERS", "5,-100123")]);
    let in_legacy_chat = in_chat("telegram", ChatType::Group, "-100123", Some("9"));
    assert!(is_authorized(&in_legacy_chat, &p, &f.store));
    let elsewhere = in_chat("telegram", ChatType::Group, "-7", Some("9"));
    assert!(!is_authorized(&elsewhere, &p, &f.store));
    let member = in_chat("telegram", ChatType::Forum, "-7", Some("5"));
    assert!(is_authorized(&member, &p, &f.store));
    // A group user list does not grant DMs.
    assert!(!is_authorized(&dm("telegram", "5"), &p, &f.store));
}

#[test]
fn rule_11_wildcard_in_any_applicable_list() {
    let f = fixture();
    assert!(is_authorized(
        &dm("discord", "9"),
        &policy(&[("DISCORD_ALLOWED_USERS", "1, *")]),
        &f.store
    ));
    assert!(is_authorized(
        &dm("slack", "U9"),
        &policy(&[("GATEWAY_ALLOWED_USERS", "*")]),
        &f.store
    ));
    assert!(!is_authorized(
        &dm("slack", "U9"),
        &policy(&[("DISCORD_ALLOWED_USERS", "*")]),
        &f.store
    ));
}

#[test]
fn rule_12_user_id_or_its_part_before_the_at_sign() {
    let f = fixture();
    let p = policy(&[
        ("SLACK_ALLOWED_USERS", "alice, U2"),
        ("GATEWAY_ALLOWED_USERS", "carol"),
    ]);
    for allowed in ["alice", "alice@example.com", "U2", "carol@x"] {
        assert!(
            is_authorized(&dm("slack", allowed), &p, &f.store),
            "{allowed}"
        );
    }
    for denied in ["bob", "bob@alice", "ALICE", "U"] {
        assert!(
            !is_authorized(&dm("slack", denied), &p, &f.store),
            "{denied}"
        );
    }
    // config.yaml's allowed_users and Telegram's `allow_from` count as the env lists do.
    let mut config = Config::default();
    config.platforms.discord.allowed_users = vec!["7".into()];
    config.platforms.telegram.extra = extra(json!({"allow_from": [8, 9]}));
    let p = policy_with(config, &[]);
    assert!(is_authorized(&dm("discord", "7"), &p, &f.store));
    assert!(is_authorized(&dm("telegram", "9"), &p, &f.store));
    assert!(!is_authorized(&dm("telegram", "7"), &p, &f.store));
}

#[test]
fn unauthorized_dm_behavior_follows_the_reference_order() {
    let pair = DmBehavior::Pair;
    let ignore = DmBehavior::Ignore;
    assert_eq!(unauthorized_dm_behavior("telegram", &policy(&[])), pair);
    assert_eq!(unauthorized_dm_behavior("email", &policy(&[])), ignore);
    // Any allowlist → ignore: platform, Telegram group lists, gateway-wide.
    for var in [
        "TELEGRAM_ALLOWED_USERS",
        "TELEGRAM_GROUP_ALLOWED_USERS",
        "TELEGRAM_GROUP_ALLOWED_CHATS",
        "GATEWAY_ALLOWED_USERS",
    ] {
        assert_eq!(
            unauthorized_dm_behavior("telegram", &policy(&[(var, "1")])),
            ignore,
            "{var}"
        );
    }
    assert_eq!(
        unauthorized_dm_behavior("discord", &policy(&[("TELEGRAM_ALLOWED_USERS", "1")])),
        pair
    );
    // The platform's dm_policy ...
    let mut config = Config::default();
    config.platforms.telegram.extra = extra(json!({"dm_policy": "Allowlist"}));
    config.platforms.slack.extra = extra(json!({"dm_policy": "pairing"}));
    config.gateway.allowed_users = vec!["1".into()];
    let p = policy_with(config.clone(), &[]);
    assert_eq!(unauthorized_dm_behavior("telegram", &p), ignore);
    assert_eq!(
        unauthorized_dm_behavior("slack", &p),
        pair,
        "explicit pairing beats the allowlist"
    );
    // ... is beaten by a global `ignore` ...
    config.unauthorized_dm_behavior = DmBehavior::Ignore;
    assert_eq!(
        unauthorized_dm_behavior("slack", &policy_with(config.clone(), &[])),
        ignore
    );
    // ... which the platform's own setting beats; an invalid one means the global value.
    config.platforms.slack.extra = extra(json!({"unauthorized_dm_behavior": " PAIR "}));
    config.platforms.discord.extra = extra(json!({"unauthorized_dm_behavior": "bogus"}));
    let p = policy_with(config, &[]);
    assert_eq!(unauthorized_dm_behavior("slack", &p), pair);
    assert_eq!(unauthorized_dm_behavior("discord", &p), ignore);
}

#[test]
fn unauthorized_dms_get_a_code_then_silence_and_groups_nothing() {
    let f = fixture();
    let p = policy(&[]);
    let reply = unauthorized_reply(&dm("telegram", "42"), &p, &f.store, 100.0)
        .unwrap()
        .unwrap();
    let code = reply
        .split('`')
        .nth(1)
        .expect("the code is quoted")
        .to_owned();
    assert_eq!(
        reply,
        format!(
            "I don't know you yet. Your pairing code is `{code}`.\n\n\
             To let you in, the owner of this bot runs:\n`hermesd pairing approve telegram {code}`"
        )
    );
    assert_eq!(
        unauthorized_reply(&dm("telegram", "42"), &p, &f.store, 101.0).unwrap(),
        None
    );
    let mut anonymous = dm("telegram", "");
    assert_eq!(
        unauthorized_reply(&anonymous, &p, &f.store, 100.0).unwrap(),
        None
    );
    anonymous.user_id = None;
    assert_eq!(
        unauthorized_reply(&anonymous, &p, &f.store, 100.0).unwrap(),
        None
    );
    let group = in_chat("telegram", ChatType::Group, "-1", Some("43"));
    assert_eq!(
        unauthorized_reply(&group, &p, &f.store, 100.0).unwrap(),
        None
    );
    let allowlisted = policy(&[("TELEGRAM_ALLOWED_USERS", "1")]);
    assert_eq!(
        unauthorized_reply(&dm("telegram", "44"), &allowlisted, &f.store, 100.0).unwrap(),
        None
    );
    for user in ["45", "46"] {
        assert!(
            unauthorized_reply(&dm("telegram", user), &p, &f.store, 100.0)
                .unwrap()
                .is_some()
        );
    }
    let crowded = unauthorized_reply(&dm("telegram", "47"), &p, &f.store, 100.0).unwrap();
    assert_eq!(crowded.as_deref(), Some(PAIRING_TOO_MANY_TEXT));
    assert_eq!(
        PAIRING_TOO_MANY_TEXT,
        "No pairing code can be issued right now (too many requests). Try again later."
    );
    // The issued code approves the user.
    f.store.approve("telegram", &code, 200.0).unwrap();
    assert!(is_authorized(&dm("telegram", "42"), &p, &f.store));
}

#[test]
fn whatsapp_allowlists_match_the_bare_wa_id() {
    let f = fixture();
    let p = policy(&[(
        "WHATSAPP_CLOUD_ALLOWED_USERS",
        "+49 (151) 234-567, 4477@s.whatsapp.net",
    )]);
    assert!(is_authorized(
        &dm("whatsapp_cloud", "49151234567"),
        &p,
        &f.store
    ));
    assert!(is_authorized(&dm("whatsapp_cloud", "4477"), &p, &f.store));
    assert!(!is_authorized(
        &dm("whatsapp_cloud", "4915123456"),
        &p,
        &f.store
    ));
    assert!(!is_authorized(&dm("telegram", "4477"), &p, &f.store));
}

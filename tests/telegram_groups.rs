//! Group gating through the real binary, in the reference's order: with `require_mention`
//! on, plain chatter, commands for another bot, replies to someone else and chats outside
//! `allowed_chats` get no reply and never reach the model; an `@mention`, a reply to the
//! bot, `/status@bot`, a mention pattern and anything in a free-response chat are answered,
//! each exactly once and quoting the message it answers.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{BOT_ID, BOT_USERNAME, Chat, MessageSpec, User};
use telegram_support::{Rig, start};

const GROUP: i64 = -100_100;
const FREE: i64 = -100_200;
const OUTSIDE: i64 = -100_300;

/// Pushes a message that must be answered; waits for the answer; returns (message id,
/// the reply's text).
async fn answered(rig: &Rig, spec: MessageSpec) -> (i64, String) {
    let chat = spec.chat.id;
    let before = rig.sent_to(chat).len();
    let (_, message_id) = rig.telegram.push_message(spec);
    let sent = rig.wait_sent_to(chat, before + 1).await;
    let reply = &sent[before];
    assert_eq!(
        reply.reply_to,
        Some(message_id),
        "the reply quotes its message: {reply:?}"
    );
    (message_id, reply.text.clone())
}

/// Pushes a message that gating must drop; waits until the adapter has disposed of it.
async fn ignored(rig: &Rig, spec: MessageSpec) -> i64 {
    let (update_id, message_id) = rig.telegram.push_message(spec);
    rig.wait_confirmed(update_id).await;
    message_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_answer_only_what_the_gating_rules_let_in() {
    let extra = format!(
        "require_mention: true\nfree_response_chats: [\"{FREE}\"]\nallowed_chats: [\"{GROUP}\", \"{FREE}\"]\nmention_patterns: [\"^hermes\\\\b\"]\n"
    );
    let rig = start(&extra, "", &[]).await;
    let bob = || User::new(7, "Bob");
    let ann = User::new(8, "Ann");
    let group = Chat::supergroup(GROUP);
    let text = |t: &str| MessageSpec::text(group.clone(), bob(), t);

    let mut dropped = vec![ignored(&rig, text("just chatting about lunch")).await];
    let (mention, reply) = answered(&rig, text(&format!("@{BOT_USERNAME} what is up"))).await;
    assert_eq!(reply, "echo: what is up", "the @mention is stripped");

    let bot_message = rig.telegram.bot_messages(GROUP).last().unwrap().message_id;
    let (to_bot, reply) = answered(
        &rig,
        text("and then?").replying_to(bot_message, User::bot(BOT_ID, BOT_USERNAME)),
    )
    .await;
    assert!(
        reply.starts_with("echo: ") && reply.ends_with("and then?"),
        "{reply}"
    );

    dropped.push(ignored(&rig, text("/status@other_helper_bot")).await);
    let (status, reply) = answered(&rig, text(&format!("/status@{BOT_USERNAME}"))).await;
    assert!(
        !reply.starts_with("echo:"),
        "a command, not a turn: {reply}"
    );

    dropped.push(ignored(&rig, text("and you?").replying_to(mention, ann.clone())).await);
    let (pattern, reply) = answered(&rig, text("Hermes, summarise the day")).await;
    assert_eq!(reply, "echo: Hermes, summarise the day");

    let (free, reply) = answered(
        &rig,
        MessageSpec::text(Chat::supergroup(FREE), ann.clone(), "anything at all"),
    )
    .await;
    assert_eq!(reply, "echo: anything at all");
    let outside = ignored(
        &rig,
        MessageSpec::text(
            Chat::supergroup(OUTSIDE),
            ann.clone(),
            &format!("@{BOT_USERNAME} let me in"),
        ),
    )
    .await;

    // A last answered message: everything pushed before it has been handled by now.
    let (last, _) = answered(&rig, text(&format!("@{BOT_USERNAME} bye"))).await;

    let replied: Vec<(i64, Option<i64>)> = rig
        .telegram
        .sent_messages()
        .iter()
        .map(|m| (m.chat_id, m.reply_to))
        .collect();
    let expected: Vec<(i64, Option<i64>)> = [
        (GROUP, mention),
        (GROUP, to_bot),
        (GROUP, status),
        (GROUP, pattern),
        (FREE, free),
        (GROUP, last),
    ]
    .into_iter()
    .map(|(chat, id)| (chat, Some(id)))
    .collect();
    assert_eq!(replied, expected, "exactly one reply per gated-in message");
    assert!(rig.sent_to(OUTSIDE).is_empty(), "{outside}");
    for id in dropped {
        assert!(replied.iter().all(|(_, r)| *r != Some(id)));
    }

    let saw = rig.model_saw();
    assert_eq!(
        saw.len(),
        5,
        "only the gated-in turns reach the model: {saw:#?}"
    );
    let wanted = [
        "what is up",
        "and then?",
        "Hermes, summarise the day",
        "anything at all",
        "bye",
    ];
    for (seen, want) in saw.iter().zip(wanted) {
        assert!(seen.ends_with(want), "{seen:?} should end with {want:?}");
    }
    let transcripts = rig.model_transcripts().join("\n");
    for never in ["lunch", "other_helper_bot", "and you?", "let me in"] {
        assert!(!transcripts.contains(never), "{never:?} reached the model");
    }
    rig.stop().await;
}

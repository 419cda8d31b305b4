//! Interactions, answered within Discord's 3-second deadline
//! (<https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction>):
//! each runs in its own task, outside the serial dispatch loop, and acknowledges at once —
//! a button click with a deferred update (type 6), a slash command with a deferred
//! ephemeral answer (type 5) — before any lookup or hand-over. Then the click becomes a
//! command event (`text` = the button's data, `event_id` = `cb:<interaction id>`), and
//! when the core accepted it the prompt's buttons are removed by editing `@original`; a
//! refused click leaves them for someone who may answer. A slash command becomes
//! `/name args` and its deferred placeholder is deleted once the core has it. The core
//! re-checks who clicked.

use std::sync::Arc;

use hermes_adapter::{AdapterContext, MessageEvent, MessageType, RecordOutcome};
use serde_json::{Value, json};

use crate::directory::ChannelInfo;
use crate::inner::Inner;
use crate::model::{CommandOption, Interaction, interaction_kind, snowflake_unix_seconds};

/// DEFERRED_UPDATE_MESSAGE (type 6): acknowledged, the message stays as it is for now.
const DEFERRED_UPDATE: u8 = 6;
/// DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE.
const DEFERRED_CHANNEL_MESSAGE: u8 = 5;
const EPHEMERAL: u64 = 1 << 6;

/// Option values in order, subcommand groups and subcommands flattened into their names
/// (`/config set key value` arrives as options `set` → `key`, `value`).
fn option_words(options: &[CommandOption], words: &mut Vec<String>) {
    for option in options {
        match &option.value {
            Some(value) => {
                let text = value
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| value.to_string());
                if !text.is_empty() {
                    words.push(text);
                }
            }
            None => {
                // Subcommand (type 1) or group (type 2): its name is part of the command.
                words.push(option.name.clone());
                option_words(&option.options, words);
            }
        }
    }
}

/// Acknowledges at once; false when Discord did not take the acknowledgement.
async fn acknowledge(inner: &Inner, interaction: &Interaction, body: &Value) -> bool {
    match inner
        .rest
        .interaction_callback(&interaction.id, &interaction.token, body)
        .await
    {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(platform = "discord", %error, "could not acknowledge an interaction");
            false
        }
    }
}

pub async fn handle(inner: Arc<Inner>, ctx: AdapterContext, interaction: Interaction) {
    let inner = &*inner;
    let Some(user) = interaction.invoker().cloned() else {
        return;
    };
    let Some(channel_id) = interaction.channel_id.clone() else {
        return;
    };
    // A RESUME replay or duplicate dispatch must not answer the interaction twice.
    let key = format!("interaction:{}", interaction.id);
    let first = inner.with_directory(|d| {
        let first = !d.handed_over.contains(&key);
        d.handed_over.insert(&key);
        first
    });
    if !first {
        return;
    }
    let (event_id, text) = match interaction.kind {
        interaction_kind::MESSAGE_COMPONENT => {
            let Some(custom_id) = interaction.data.custom_id.clone() else {
                return;
            };
            acknowledge(inner, &interaction, &json!({"type": DEFERRED_UPDATE})).await;
            (format!("cb:{}", interaction.id), custom_id)
        }
        interaction_kind::APPLICATION_COMMAND => {
            let Some(name) = interaction.data.name.clone() else {
                return;
            };
            let body = json!({"type": DEFERRED_CHANNEL_MESSAGE, "data": {"flags": EPHEMERAL}});
            acknowledge(inner, &interaction, &body).await;
            let mut words = vec![format!("/{name}")];
            option_words(&interaction.data.options, &mut words);
            (format!("slash:{}", interaction.id), words.join(" "))
        }
        _ => return,
    };

    let is_dm = interaction.guild_id.is_none();
    let chat = if is_dm {
        ChannelInfo::dm(&channel_id)
    } else {
        match inner.channel(&channel_id).await {
            Some(chat) => chat,
            None => ChannelInfo::in_guild(&channel_id, interaction.guild_id.clone()),
        }
    };
    let mut source = inner.source_for_user(&chat, is_dm, &user.id, user.display_name());
    let roles = interaction
        .member
        .as_ref()
        .map(|m| m.roles.as_slice())
        .unwrap_or_default();
    source.role_authorized = !is_dm
        && !inner.settings.allowed_roles.is_empty()
        && roles
            .iter()
            .any(|r| inner.settings.allowed_roles.contains(r));
    let mut event = MessageEvent::text(&event_id, source, &text);
    event.message_type = MessageType::Command;
    event.timestamp = snowflake_unix_seconds(&interaction.id).unwrap_or(0.0);
    event.reply_to_message_id = interaction
        .message
        .as_ref()
        .and_then(|m| m["id"].as_str())
        .map(str::to_owned);
    let outcome = ctx.deliver(event).await;
    tracing::debug!(
        platform = "discord",
        event_id,
        ?outcome,
        "interaction handed over"
    );
    let application_id = if interaction.application_id.is_empty() {
        inner.application_id().unwrap_or_default()
    } else {
        interaction.application_id.clone()
    };
    let accepted = matches!(outcome, RecordOutcome::Recorded | RecordOutcome::Duplicate);
    if interaction.kind == interaction_kind::MESSAGE_COMPONENT && accepted {
        // The answered prompt loses its buttons.
        if let Err(error) = inner
            .rest
            .edit_original_response(
                &application_id,
                &interaction.token,
                &json!({"components": []}),
            )
            .await
        {
            tracing::warn!(platform = "discord", %error, "could not remove an answered prompt's buttons");
        }
    }
    if interaction.kind == interaction_kind::APPLICATION_COMMAND
        && let Err(error) = inner
            .rest
            .delete_original_response(&application_id, &interaction.token)
            .await
    {
        tracing::debug!(platform = "discord", %error, "could not clean up a deferred slash response");
    }
}

//! Interactions: a button click becomes a command event (`text` = the button's data,
//! `event_id` = `cb:<interaction id>`) and is answered once the core has judged it — with an
//! UPDATE_MESSAGE that removes the buttons when it was accepted, or with a DEFERRED_UPDATE
//! that leaves the prompt as it was when the core refused the clicker (or could not record
//! the click), so the buttons stay for someone who may answer; a slash command is deferred (ephemeral), becomes `/name args`,
//! and the deferred placeholder is deleted once the core has it. The core re-checks who
//! clicked.

use hermes_adapter::{AdapterContext, MessageEvent, MessageType, RecordOutcome};
use serde_json::json;

use crate::directory::ChannelInfo;
use crate::inner::Inner;
use crate::model::{Interaction, channel_kind, interaction_kind, snowflake_unix_seconds};

/// UPDATE_MESSAGE (type 7) with no components: the prompt's buttons disappear.
const UPDATE_MESSAGE: u8 = 7;
/// DEFERRED_UPDATE_MESSAGE (type 6): acknowledged, the message stays as it is.
const DEFERRED_UPDATE: u8 = 6;
/// DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE.
const DEFERRED_CHANNEL_MESSAGE: u8 = 5;
const EPHEMERAL: u64 = 1 << 6;

pub async fn handle(inner: &Inner, ctx: &AdapterContext, interaction: Interaction) {
    let Some(user) = interaction.invoker().cloned() else {
        return;
    };
    let Some(channel_id) = interaction.channel_id.clone() else {
        return;
    };
    // A RESUME replay or duplicate dispatch must not answer the interaction twice.
    let key = format!("interaction:{}", interaction.id);
    if inner.already_handed_over(&key) {
        return;
    }
    inner.with_directory(|d| d.handed_over.insert(&key));
    let (event_id, text) = match interaction.kind {
        interaction_kind::MESSAGE_COMPONENT => {
            let Some(custom_id) = interaction.data.custom_id.clone() else {
                return;
            };
            (format!("cb:{}", interaction.id), custom_id)
        }
        interaction_kind::APPLICATION_COMMAND => {
            let Some(name) = interaction.data.name.clone() else {
                return;
            };
            let body = json!({"type": DEFERRED_CHANNEL_MESSAGE, "data": {"flags": EPHEMERAL}});
            if let Err(error) = inner
                .rest
                .interaction_callback(&interaction.id, &interaction.token, &body)
                .await
            {
                tracing::warn!(platform = "discord", %error, "could not defer a slash command");
            }
            let args: Vec<String> = interaction
                .data
                .options
                .iter()
                .filter_map(|o| o.value.as_ref())
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| v.to_string())
                })
                .filter(|v| !v.is_empty())
                .collect();
            let text = if args.is_empty() {
                format!("/{name}")
            } else {
                format!("/{name} {}", args.join(" "))
            };
            (format!("slash:{}", interaction.id), text)
        }
        _ => return,
    };

    let is_dm = interaction.guild_id.is_none();
    let chat = if is_dm {
        ChannelInfo {
            id: channel_id.clone(),
            kind: channel_kind::DM,
            name: None,
            guild_id: None,
            parent_id: None,
            topic: None,
            owner_id: None,
        }
    } else {
        inner.channel(&channel_id).await.unwrap_or(ChannelInfo {
            id: channel_id.clone(),
            kind: 0,
            name: None,
            guild_id: interaction.guild_id.clone(),
            parent_id: None,
            topic: None,
            owner_id: None,
        })
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
    if interaction.kind == interaction_kind::MESSAGE_COMPONENT {
        // Recording is a local write, well within Discord's 3 s answer deadline.
        let body = match outcome {
            RecordOutcome::Recorded | RecordOutcome::Duplicate => {
                json!({"type": UPDATE_MESSAGE, "data": {"components": []}})
            }
            RecordOutcome::Refused | RecordOutcome::Failed => json!({"type": DEFERRED_UPDATE}),
        };
        if let Err(error) = inner
            .rest
            .interaction_callback(&interaction.id, &interaction.token, &body)
            .await
        {
            tracing::warn!(platform = "discord", %error, "could not acknowledge a button click");
        }
    }
    if interaction.kind == interaction_kind::APPLICATION_COMMAND {
        let application_id = if interaction.application_id.is_empty() {
            inner.application_id().unwrap_or_default()
        } else {
            interaction.application_id.clone()
        };
        if let Err(error) = inner
            .rest
            .delete_original_response(&application_id, &interaction.token)
            .await
        {
            tracing::debug!(platform = "discord", %error, "could not clean up a deferred slash response");
        }
    }
}

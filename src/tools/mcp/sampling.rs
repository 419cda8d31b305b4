//! A server's `sampling/createMessage` requests, answered by our configured model within the
//! server's `sampling:` limits (Hermes's `SamplingHandler` rules): off with `enabled: false`,
//! at most `max_rpm` requests in any minute, `maxTokens` capped to `max_tokens_cap`, the
//! `model` setting first, then the server's first hint when a configured endpoint serves it,
//! then our default; `allowed_models` restricts the model used; each request gets `timeout`.
//!
//! Text and images in the server's messages are passed on; tool use inside sampling is not
//! offered (the `sampling.tools` capability is not advertised), so such a request is refused.
// The protocol's 2026-07-28 revision deprecates sampling (SEP-2577), but servers on earlier
// revisions still send it and Hermes configs still set it.
#![allow(deprecated)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, Role, SamplingMessage,
    SamplingMessageContentBlock,
};

use crate::agent::message::{ChatMessage, ImagePart};
use crate::agent::provider::{FinishReason, ModelClient, ModelRequest};
use crate::config::{McpSampling, SamplingLogLevel};

/// The model client sampling goes through, replaced on reload; shared by every server.
#[derive(Debug, Clone, Default)]
pub struct ModelSlot(Arc<RwLock<Option<ModelClient>>>);

impl ModelSlot {
    pub fn set(&self, client: Option<ModelClient>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = client;
    }

    fn get(&self) -> Option<ModelClient> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// One server's sampling: its settings and its request window.
#[derive(Debug)]
pub struct Sampler {
    server: String,
    config: McpSampling,
    models: ModelSlot,
    /// When the requests of the last minute came.
    recent: Mutex<VecDeque<Instant>>,
}

impl Sampler {
    pub fn new(server: &str, config: McpSampling, models: ModelSlot) -> Arc<Self> {
        Arc::new(Self {
            server: server.to_owned(),
            config,
            models,
            recent: Mutex::new(VecDeque::new()),
        })
    }

    /// Whether the `sampling` capability is advertised to the server.
    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    pub async fn create_message(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, ErrorData> {
        let refuse = |message: String| {
            tracing::warn!(mcp_server = %self.server, "sampling refused: {message}");
            Err(ErrorData::invalid_request(message, None))
        };
        if !self.config.enabled {
            return refuse(format!(
                "sampling is disabled for this client (mcp_servers.{}.sampling.enabled is false)",
                self.server
            ));
        }
        if !self.admit(Instant::now()) {
            return refuse(format!(
                "sampling rate limit reached: at most {} requests a minute \
                 (mcp_servers.{}.sampling.max_rpm)",
                self.config.max_rpm, self.server
            ));
        }
        if params.tools.as_ref().is_some_and(|t| !t.is_empty()) {
            return refuse("tool use inside sampling is not supported by this client".into());
        }
        let Some(base) = self.models.get() else {
            return refuse("no model provider is configured".into());
        };
        let client = self.choose(&base, &params);
        let model = client
            .endpoints()
            .first()
            .map(|e| e.model.clone())
            .unwrap_or_default();
        if !self.config.allowed_models.is_empty() && !self.config.allowed_models.contains(&model) {
            return refuse(format!(
                "model '{model}' is not in mcp_servers.{}.sampling.allowed_models",
                self.server
            ));
        }
        let messages = match convert(&params.messages) {
            Ok(messages) => messages,
            Err(message) => return refuse(message),
        };
        let max_tokens = params.max_tokens.min(self.config.max_tokens_cap);
        self.log(format_args!(
            "sampling request: model={model}, max_tokens={max_tokens}, messages={}",
            messages.len()
        ));
        let request = ModelRequest {
            system: params.system_prompt.filter(|s| !s.is_empty()),
            messages,
            tools: Vec::new(),
            max_tokens: Some(max_tokens),
            stream: false,
        };
        let reply = match tokio::time::timeout(
            self.config.timeout,
            client.complete(&request, &mut |_| {}),
        )
        .await
        {
            Err(_) => {
                return Err(ErrorData::internal_error(
                    format!(
                        "the model did not answer within {:?} (mcp_servers.{}.sampling.timeout)",
                        self.config.timeout, self.server
                    ),
                    None,
                ));
            }
            Ok(Err(error)) => return Err(ErrorData::internal_error(error.to_string(), None)),
            Ok(Ok(reply)) => reply,
        };
        self.log(format_args!(
            "sampling answered: model={}, tokens={}",
            reply.model,
            reply.usage.input_tokens + reply.usage.output_tokens
        ));
        let stop = match reply.finish_reason {
            FinishReason::Length => CreateMessageResult::STOP_REASON_END_MAX_TOKEN,
            _ => CreateMessageResult::STOP_REASON_END_TURN,
        };
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text(reply.content.unwrap_or_default()),
            reply.model,
        )
        .with_stop_reason(stop))
    }

    /// Counts a request in the sliding minute unless `max_rpm` are already there.
    fn admit(&self, now: Instant) -> bool {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(60))
        {
            recent.pop_front();
        }
        if recent.len() >= self.config.max_rpm as usize {
            return false;
        }
        recent.push_back(now);
        true
    }

    /// The configured `model`, else the first hint a configured endpoint serves, else ours.
    fn choose(&self, base: &ModelClient, params: &CreateMessageRequestParams) -> ModelClient {
        if let Some(model) = &self.config.model {
            return base
                .overridden(None, Some(model))
                .unwrap_or_else(|| base.clone());
        }
        let hints = params
            .model_preferences
            .as_ref()
            .and_then(|p| p.hints.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|h| h.name.as_deref());
        for hint in hints {
            let choice = crate::agent::provider::ModelChoice {
                model: hint.to_owned(),
                provider: None,
            };
            if let Some(client) = base.with_primary(&choice) {
                return client;
            }
        }
        base.clone()
    }

    fn log(&self, message: std::fmt::Arguments<'_>) {
        let server = &self.server;
        match self.config.log_level {
            SamplingLogLevel::Debug => tracing::debug!(mcp_server = %server, "{message}"),
            SamplingLogLevel::Info => tracing::info!(mcp_server = %server, "{message}"),
            SamplingLogLevel::Warning => tracing::warn!(mcp_server = %server, "{message}"),
        }
    }
}

/// The server's messages as our chat messages: text joined, images attached.
fn convert(messages: &[SamplingMessage]) -> Result<Vec<ChatMessage>, String> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        let mut text = Vec::new();
        let mut images = Vec::new();
        for block in message.content.clone().into_vec() {
            match block {
                SamplingMessageContentBlock::Text(t) => text.push(t.text),
                SamplingMessageContentBlock::Image(i) => {
                    images.push(ImagePart::new(i.mime_type, i.data));
                }
                SamplingMessageContentBlock::Audio(_) => {
                    text.push("[audio this client cannot pass on]".into());
                }
                SamplingMessageContentBlock::ToolUse(_)
                | SamplingMessageContentBlock::ToolResult(_) => {
                    return Err("tool use inside sampling is not supported by this client".into());
                }
                other => {
                    return Err(format!(
                        "a sampling message block this client cannot read: {other:?}"
                    ));
                }
            }
        }
        let mut chat = match message.role {
            Role::User => ChatMessage::user(text.join("\n")),
            Role::Assistant => ChatMessage::assistant(text.join("\n")),
        };
        chat.images = images;
        out.push(chat);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_admits_max_rpm_a_minute() {
        let config = McpSampling {
            max_rpm: 2,
            ..McpSampling::default()
        };
        let sampler = Sampler::new("s", config, ModelSlot::default());
        let start = Instant::now();
        assert!(sampler.admit(start));
        assert!(sampler.admit(start + Duration::from_secs(1)));
        assert!(!sampler.admit(start + Duration::from_secs(59)));
        assert!(sampler.admit(start + Duration::from_secs(60)));
        assert!(!sampler.admit(start + Duration::from_secs(60)));
    }
}

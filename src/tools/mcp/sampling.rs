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

use super::sampling_model::{
    SamplingImage, SamplingModel, SamplingRequest, SamplingRole, SamplingTurn,
};
use crate::config::{McpSampling, SamplingLogLevel};

/// The model sampling goes through, replaced on reload; shared by every server.
#[derive(Clone, Default)]
pub struct ModelSlot(Arc<RwLock<Option<Arc<dyn SamplingModel>>>>);

impl std::fmt::Debug for ModelSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = self.0.read().map(|m| m.is_some()).unwrap_or(false);
        f.debug_tuple("ModelSlot")
            .field(&if set { "set" } else { "empty" })
            .finish()
    }
}

impl ModelSlot {
    pub fn set(&self, model: Option<Arc<dyn SamplingModel>>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = model;
    }

    fn get(&self) -> Option<Arc<dyn SamplingModel>> {
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
        let client = self.choose(base.as_ref(), &params);
        let model = client.model_name();
        if !self.config.allowed_models.is_empty() && !self.config.allowed_models.contains(&model) {
            return refuse(format!(
                "model '{model}' is not in mcp_servers.{}.sampling.allowed_models",
                self.server
            ));
        }
        let turns = match convert(&params.messages) {
            Ok(turns) => turns,
            Err(message) => return refuse(message),
        };
        let max_tokens = params.max_tokens.min(self.config.max_tokens_cap);
        self.log(format_args!(
            "sampling request: model={model}, max_tokens={max_tokens}, messages={}",
            turns.len()
        ));
        let request = SamplingRequest {
            system: params.system_prompt.filter(|s| !s.is_empty()),
            turns,
            max_tokens,
        };
        let reply = match tokio::time::timeout(self.config.timeout, client.answer(request)).await {
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
            reply.model, reply.tokens
        ));
        let stop = if reply.hit_token_limit {
            CreateMessageResult::STOP_REASON_END_MAX_TOKEN
        } else {
            CreateMessageResult::STOP_REASON_END_TURN
        };
        Ok(
            CreateMessageResult::new(SamplingMessage::assistant_text(reply.text), reply.model)
                .with_stop_reason(stop),
        )
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
    fn choose(
        &self,
        base: &dyn SamplingModel,
        params: &CreateMessageRequestParams,
    ) -> Arc<dyn SamplingModel> {
        let hints: Vec<&str> = params
            .model_preferences
            .as_ref()
            .and_then(|p| p.hints.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|h| h.name.as_deref())
            .collect();
        base.choose(self.config.model.as_deref(), &hints)
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

/// The server's messages as turns: text joined, images attached.
fn convert(messages: &[SamplingMessage]) -> Result<Vec<SamplingTurn>, String> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        let mut text = Vec::new();
        let mut images = Vec::new();
        for block in message.content.clone().into_vec() {
            match block {
                SamplingMessageContentBlock::Text(t) => text.push(t.text),
                SamplingMessageContentBlock::Image(i) => {
                    images.push(SamplingImage {
                        mime_type: i.mime_type,
                        data: i.data,
                    });
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
        let role = match message.role {
            Role::User => SamplingRole::User,
            Role::Assistant => SamplingRole::Assistant,
        };
        out.push(SamplingTurn {
            role,
            text: text.join("\n"),
            images,
        });
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

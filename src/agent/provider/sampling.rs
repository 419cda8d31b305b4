//! The model client answering MCP sampling requests: the agent side of
//! `tools::mcp::SamplingModel`, so the MCP client reaches our model without naming it.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::{FinishReason, ModelChoice, ModelClient, ModelRequest};
use crate::agent::message::{ChatMessage, ImagePart};
use crate::tools::mcp::{
    SamplingFailure, SamplingModel, SamplingReply, SamplingRequest, SamplingRole,
};

impl SamplingModel for ModelClient {
    fn choose(&self, configured: Option<&str>, hints: &[&str]) -> Arc<dyn SamplingModel> {
        if let Some(model) = configured {
            return Arc::new(
                self.overridden(None, Some(model))
                    .unwrap_or_else(|| self.clone()),
            );
        }
        for hint in hints {
            let choice = ModelChoice::configured(*hint, None);
            if let Some(client) = self.with_primary(&choice) {
                return Arc::new(client);
            }
        }
        Arc::new(self.clone())
    }

    fn model_name(&self) -> String {
        self.endpoints()
            .first()
            .map(|e| e.model.clone())
            .unwrap_or_default()
    }

    fn answer(
        &self,
        request: SamplingRequest,
    ) -> BoxFuture<'_, Result<SamplingReply, SamplingFailure>> {
        Box::pin(async move {
            let messages = request
                .turns
                .into_iter()
                .map(|turn| {
                    let mut message = match turn.role {
                        SamplingRole::User => ChatMessage::user(turn.text),
                        SamplingRole::Assistant => ChatMessage::assistant(turn.text),
                    };
                    message.images = turn
                        .images
                        .into_iter()
                        .map(|image| ImagePart::new(image.mime_type, image.data))
                        .collect();
                    message
                })
                .collect();
            let request = ModelRequest {
                system: request.system,
                messages,
                tools: Default::default(),
                max_tokens: Some(request.max_tokens),
                stream: false,
            };
            let reply = self
                .complete(&request, &mut |_| {})
                .await
                .map_err(|error| SamplingFailure(error.to_string()))?;
            Ok(SamplingReply {
                tokens: reply.usage.input_tokens + reply.usage.output_tokens,
                hit_token_limit: matches!(reply.finish_reason, FinishReason::Length),
                text: reply.content.unwrap_or_default(),
                model: reply.model,
            })
        })
    }
}

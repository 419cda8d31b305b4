//! The HTTP side: `POST {api prefix}/{method}` with a JSON or multipart body and a
//! per-request timeout, and file downloads from `{file prefix}/{path}` with a size cap (the
//! prefixes carry the token, see `endpoints`). Error text is scrubbed of the token before
//! it leaves this module.

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::ApiError;
use crate::endpoints::{self, Endpoints};
use hermes_adapter::Secret;

#[derive(Clone)]
pub struct BotApi {
    http: reqwest::Client,
    endpoints: Endpoints,
    token: Secret,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotApi")
            .field("endpoints", &self.endpoints)
            .field("token", &self.token)
            .finish()
    }
}

impl BotApi {
    pub fn new(net: &hermes_adapter::net::Net, endpoints: &Endpoints, token: Secret) -> Self {
        let http = net
            .http_client()
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .unwrap_or_default();
        Self {
            http,
            endpoints: endpoints.clone(),
            token,
        }
    }

    fn method_url(&self, method: &str) -> String {
        self.endpoints.method_url(self.token.expose(), method)
    }

    /// The URL `method` is called at, with `<token>` in place of the token (for errors).
    pub fn method_url_shape(&self, method: &str) -> String {
        format!("{}/{method}", endpoints::display(&self.endpoints.api))
    }

    /// Calls `method` with a JSON body; `timeout` bounds the whole exchange.
    pub async fn call(
        &self,
        method: &str,
        params: &Value,
        timeout: Duration,
    ) -> Result<Value, ApiError> {
        let request = self
            .http
            .post(self.method_url(method))
            .json(params)
            .timeout(timeout);
        self.finish(request).await
    }

    /// Calls `method` with a multipart body (file uploads).
    pub async fn call_multipart(
        &self,
        method: &str,
        form: reqwest::multipart::Form,
        timeout: Duration,
    ) -> Result<Value, ApiError> {
        let request = self
            .http
            .post(self.method_url(method))
            .multipart(form)
            .timeout(timeout);
        self.finish(request).await
    }

    async fn finish(&self, request: reqwest::RequestBuilder) -> Result<Value, ApiError> {
        let response = request.send().await.map_err(|e| self.transport_error(e))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(e))?;
        let Ok(envelope) = serde_json::from_slice::<Value>(&body) else {
            return Err(ApiError::Api {
                status,
                description: format!("HTTP {status} with a non-JSON body"),
                retry_after: None,
            });
        };
        if envelope["ok"].as_bool() == Some(true) {
            return Ok(envelope.get("result").cloned().unwrap_or(Value::Null));
        }
        let description = envelope["description"].as_str().unwrap_or("no description");
        if let Some(to_chat_id) = envelope["parameters"]["migrate_to_chat_id"].as_i64() {
            return Err(ApiError::Migrated {
                to_chat_id,
                description: self.token.redact(description),
            });
        }
        Err(ApiError::Api {
            status: envelope["error_code"]
                .as_u64()
                .map(|c| c as u16)
                .unwrap_or(status),
            description: self.token.redact(description),
            retry_after: envelope["parameters"]["retry_after"].as_u64(),
        })
    }

    fn transport_error(&self, error: reqwest::Error) -> ApiError {
        let unreachable = error.is_connect() || error.is_builder();
        let timed_out = error.is_timeout();
        // The whole chain: the reason (a refused certificate, a refused CONNECT) is at its end.
        let detail = self
            .token
            .redact(&hermes_adapter::net::error_chain(&error.without_url()));
        if unreachable {
            ApiError::Unreachable(detail)
        } else if timed_out {
            ApiError::TimedOut(detail)
        } else {
            ApiError::NoAnswer(detail)
        }
    }

    /// Downloads `file_path` into `dest`, refusing (and removing the partial file) once it
    /// exceeds `max_bytes`. Returns the byte count.
    pub async fn download(
        &self,
        file_path: &str,
        dest: &Path,
        max_bytes: u64,
        timeout: Duration,
    ) -> Result<u64, ApiError> {
        let prefix = endpoints::fill(&self.endpoints.files, self.token.expose());
        let url = format!("{prefix}/{file_path}");
        let response = self
            .http
            .get(url)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| self.transport_error(e))?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(ApiError::Api {
                status,
                description: format!("file download answered HTTP {status}"),
                retry_after: None,
            });
        }
        let io_error =
            |e: std::io::Error| ApiError::NoAnswer(format!("writing {}: {e}", dest.display()));
        // Downloads land in the operator's home: owner-only, whatever the process umask.
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(dest)
            .await
            .map_err(io_error)?;
        let mut written = 0u64;
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| self.transport_error(e))?;
            written += chunk.len() as u64;
            if written > max_bytes {
                drop(file);
                let _ = tokio::fs::remove_file(dest).await;
                return Err(ApiError::Api {
                    status: 413,
                    description: format!("file is larger than the {max_bytes}-byte cap"),
                    retry_after: None,
                });
            }
            file.write_all(&chunk).await.map_err(io_error)?;
        }
        file.flush().await.map_err(io_error)?;
        Ok(written)
    }
}

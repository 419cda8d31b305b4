//! `ModelClient`: the primary endpoint and its fallbacks behind one `complete` call.

use super::call::call_endpoint;
use super::endpoint::{Endpoint, endpoints_from_config};
use super::error::{Attempt, ProviderError};
use super::models_list::{ListingCache, ListingError, ListingKey, fetch_listing};
use super::policy::{NextStep, next_step};
use super::prepared::Prepared;
use super::settings::HttpSettings;
use super::types::{ModelReply, ModelRequest, StreamDelta};
use crate::config::Config;
use hermes_adapter::net::Net;
use std::sync::Arc;
use std::time::Instant;

/// Calls the configured model, falling back along the chain. Cheap to clone: the HTTP
/// connection pool is shared.
#[derive(Debug, Clone)]
pub struct ModelClient {
    endpoints: Vec<Endpoint>,
    http: HttpSettings,
    client: reqwest::Client,
    /// Models listings fetched for `/model`, shared by the clones (a reload builds a new
    /// client, so new keys or URLs start with an empty cache).
    listings: Arc<ListingCache>,
}

impl ModelClient {
    /// The client for the validated config: `model` and `providers` give the primary
    /// endpoint, `fallback_providers` the chain. Errors name the keys to set.
    pub fn from_config(config: &Config) -> Result<ModelClient, ProviderError> {
        Self::from_config_with_settings(config, HttpSettings::default())
    }

    /// [`ModelClient::from_config`] with other timeouts and retry limits.
    pub fn from_config_with_settings(
        config: &Config,
        http: HttpSettings,
    ) -> Result<ModelClient, ProviderError> {
        let mut endpoints = endpoints_from_config(config)?.into_iter();
        let primary = endpoints
            .next()
            .ok_or_else(|| ProviderError::NotConfigured("no model provider configured".into()))?;
        let net = Net::new(&config.network).map_err(|e| ProviderError::Client(e.to_string()))?;
        Self::with_net(&net, primary, endpoints.collect(), http)
    }

    /// A client for explicit endpoints (tests, tools that pick their own model).
    pub fn with_endpoints(
        primary: Endpoint,
        fallbacks: Vec<Endpoint>,
        http: HttpSettings,
    ) -> Result<ModelClient, ProviderError> {
        Self::with_net(&Net::direct(), primary, fallbacks, http)
    }

    /// [`ModelClient::with_endpoints`] through the given proxies and TLS trust.
    pub fn with_net(
        net: &Net,
        primary: Endpoint,
        fallbacks: Vec<Endpoint>,
        http: HttpSettings,
    ) -> Result<ModelClient, ProviderError> {
        let client = net
            .http_client()
            .connect_timeout(http.connect_timeout)
            .user_agent(concat!("hermesd/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| ProviderError::Client(error.to_string()))?;
        let mut endpoints = vec![primary];
        endpoints.extend(fallbacks);
        Ok(ModelClient {
            endpoints,
            http,
            client,
            listings: Arc::default(),
        })
    }

    /// The same client with another primary: the configured endpoint of `provider` (the
    /// primary's when `None`) asked for `model` (its own when `None`); the fallbacks stay.
    /// `None` when no configured endpoint belongs to `provider`.
    pub fn overridden(&self, provider: Option<&str>, model: Option<&str>) -> Option<ModelClient> {
        let index = match provider {
            None => 0,
            Some(name) => self.endpoints.iter().position(|e| e.provider == name)?,
        };
        let mut endpoints = self.endpoints.clone();
        let mut primary = endpoints.remove(index);
        if let Some(model) = model {
            primary.model = model.to_owned();
        }
        endpoints.insert(0, primary);
        Some(ModelClient {
            endpoints,
            http: self.http.clone(),
            client: self.client.clone(),
            listings: self.listings.clone(),
        })
    }

    /// The same client with its primary endpoint at `base_url` (a scheduled job's own
    /// endpoint; the caller has checked that the primary's key may be sent there).
    pub fn with_primary_base_url(&self, base_url: &str) -> ModelClient {
        let mut client = self.clone();
        if let Some(primary) = client.endpoints.first_mut() {
            primary.base_url = base_url.to_owned();
        }
        client
    }

    /// The primary endpoint first, then the fallbacks in order.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// The model names this client can call, primary first, without repeats (what `/model`
    /// may switch between).
    pub fn configured_models(&self) -> Vec<String> {
        let mut models: Vec<String> = Vec::new();
        for endpoint in &self.endpoints {
            if !models.contains(&endpoint.model) {
                models.push(endpoint.model.clone());
            }
        }
        models
    }

    /// The same client with the first endpoint serving `choice` (its model, and its
    /// provider when named; or the server whose listing named the model) as its primary,
    /// asked for the chosen model (the others stay fallbacks, in order); `None` when no
    /// endpoint serves it. Shares the connection pool.
    pub fn with_primary(&self, choice: &ModelChoice) -> Option<ModelClient> {
        let index = self.endpoints.iter().position(|e| choice.served_by(e))?;
        let mut client = self.clone();
        let mut chosen = client.endpoints.remove(index);
        chosen.model = choice.model.clone();
        client.endpoints.insert(0, chosen);
        Some(client)
    }

    /// The models `endpoint`'s server lists (see `models_list`), from the cache when it was
    /// fetched in the last ten minutes. Only `/model` asks, for a name not configured.
    pub async fn listed_models(&self, endpoint: &Endpoint) -> Result<Arc<[String]>, ListingError> {
        let key = ListingKey::of(endpoint);
        if let Some(models) = self.listings.get(&key, Instant::now()) {
            return Ok(models);
        }
        let models: Arc<[String]> = fetch_listing(&self.client, endpoint).await?.into();
        self.listings.put(key, models.clone(), Instant::now());
        Ok(models)
    }

    pub fn http_settings(&self) -> &HttpSettings {
        &self.http
    }

    /// One model reply. The history is checked first (repaired or rejected, never sent
    /// malformed); then each endpoint is tried in order under the fallback policy. Streamed
    /// text goes to `on_delta` as it arrives, with [`StreamDelta::Restart`] before another
    /// attempt when an earlier one had streamed something.
    ///
    /// Cancel-safe: dropping the future aborts the HTTP request and returns nothing.
    pub async fn complete(
        &self,
        request: &ModelRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ModelReply, ProviderError> {
        let prepared = Prepared::new(request)?;
        let mut attempts = Vec::new();
        let mut api_calls = 0;
        let mut streamed = false;
        for endpoint in &self.endpoints {
            let mut retries = 0;
            loop {
                if std::mem::take(&mut streamed) {
                    on_delta(StreamDelta::Restart);
                }
                api_calls += 1;
                let mut forward = |delta: StreamDelta| {
                    streamed = true;
                    on_delta(delta);
                };
                let result =
                    call_endpoint(&self.client, &self.http, endpoint, &prepared, &mut forward)
                        .await;
                let error = match result {
                    Ok(mut reply) => {
                        reply.usage.api_calls = api_calls;
                        return Ok(reply);
                    }
                    Err(error) => error,
                };
                let step = next_step(&error, retries, &self.http);
                tracing::warn!(
                    provider = %endpoint.provider,
                    model = %endpoint.model,
                    kind = error.kind(),
                    error = %error,
                    next = ?step,
                    "model call failed"
                );
                match step {
                    NextStep::Retry(wait) => {
                        tokio::time::sleep(wait).await;
                        retries += 1;
                    }
                    NextStep::Fallback => {
                        attempts.push(Attempt {
                            provider: endpoint.provider.clone(),
                            model: endpoint.model.clone(),
                            error,
                        });
                        break;
                    }
                    NextStep::GiveUp => return Err(error),
                }
            }
        }
        Err(ProviderError::AllFailed { attempts })
    }
}

/// A conversation's `/model` choice: a model, and the provider serving it when the user
/// named one (`--provider`) or the switch recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    pub model: String,
    pub provider: Option<String>,
    /// The base URL of the endpoint whose models listing named this model, when config.yaml
    /// does not configure it: that endpoint (same provider, same server) serves it.
    pub listed_by: Option<String>,
}

impl ModelChoice {
    /// A choice of a configured model (from `provider` when named).
    pub fn configured(model: impl Into<String>, provider: Option<String>) -> Self {
        Self {
            model: model.into(),
            provider,
            listed_by: None,
        }
    }

    pub fn served_by(&self, endpoint: &Endpoint) -> bool {
        let provider_matches = self
            .provider
            .as_deref()
            .is_none_or(|p| p.eq_ignore_ascii_case(&endpoint.provider));
        let listed_there = self.provider.is_some()
            && self.listed_by.as_deref().is_some_and(|url| {
                url.trim().trim_end_matches('/') == endpoint.base_url.trim().trim_end_matches('/')
            });
        provider_matches && (endpoint.model == self.model || listed_there)
    }
}

//! Which session an event talks in: the routing index entry for its key, reset by policy
//! when stale, created when missing, and the slot's cached agent for it.

use std::sync::Arc;

use hermes_adapter::SessionSource;
use serde_json::{Value, json};

use super::API_PLATFORM;
use super::slot::Slot;
use crate::agent::provider::ModelChoice;
use crate::agent::{Agent, AgentDeps, AgentError, new_session_id};
use crate::config::Config;
use crate::gateway::reset::{ResetReason, policy_for, reset_notice, should_reset};
use crate::gateway::routing::RouteEntry;
use crate::gateway::routing::RoutingIndex;
use crate::gateway::session_key::KeyPolicy;
use crate::gateway::session_key::{legacy_session_key, same_person};
use crate::state::{Store, StoreError, StoreResult, now_epoch};

/// The routing-entry field Hermes keeps a session's `/model` choice in (without secrets).
pub(super) const OVERRIDE_FIELD: &str = "model_override";
/// Marks a `model_override` whose model came from its server's models listing.
pub(super) const LISTED_FIELD: &str = "listed";

/// An agent ready for a turn, and the notice owed to the user first (an automatic reset).
pub(super) struct Prepared {
    pub agent: Agent,
    pub notice: Option<String>,
}

/// Hermes's `SessionSource.to_dict()` shape.
pub(super) fn origin_json(source: &SessionSource) -> Value {
    let mut origin = json!({
        "platform": source.platform,
        "chat_id": source.chat_id,
        "chat_name": source.chat_name,
        "chat_type": source.chat_type.as_str(),
        "user_id": source.user_id,
        "user_name": source.user_name,
        "thread_id": source.thread_id,
        "chat_topic": source.chat_topic,
    });
    if let Some(alt) = &source.user_id_alt {
        origin["user_id_alt"] = json!(alt);
    }
    if let Some(scope) = &source.scope_id {
        origin["scope_id"] = json!(scope);
    }
    origin
}

/// The routing index seen as conversations: which session a key talks in, when it is
/// reset, where `/new` and `/resume` point it, and the agent a turn in it runs.
/// The scope the routing entries of this home are kept under: the canonical path of its
/// sessions directory (made if missing). Instances sharing PostgreSQL have homes of their
/// own, perhaps at different paths; their entries are the cluster's, under one empty scope.
pub(super) fn routing_scope(home: &crate::home::HermesHome, store: &Store) -> String {
    let scope = home.path().join("sessions");
    if let Err(e) = std::fs::create_dir_all(&scope) {
        tracing::warn!(error = %e, "cannot create the sessions directory");
    }
    crate::state::routing_scope(home, store)
}

#[derive(Debug)]
pub(super) struct Sessions {
    store: Store,
    routing: Arc<RoutingIndex>,
    key_policy: KeyPolicy,
}

impl Sessions {
    pub(super) fn new(store: Store, routing: Arc<RoutingIndex>, key_policy: KeyPolicy) -> Self {
        Self {
            store,
            routing,
            key_policy,
        }
    }

    /// The routing entry for `key`, after the reset policy; creates one when missing.
    /// `allow_reset` is false for resumed turns (they finish where they started).
    pub(super) async fn route(
        &self,
        config: &Config,
        key: &str,
        source: &SessionSource,
        allow_reset: bool,
    ) -> StoreResult<(RouteEntry, Option<ResetReason>)> {
        let now = now_epoch();
        if self.routing.get(key).is_none() {
            self.adopt_legacy_route(key, source).await?;
        }
        if let Some(mut entry) = self.routing.get(key) {
            let policy = policy_for(config, &source.platform, source.chat_type.as_str());
            let reason = allow_reset
                .then(|| should_reset(policy, entry.updated_at, now))
                .flatten();
            if let Some(reason) = reason {
                self.store
                    .end_session(&entry.session_id, "session_reset")
                    .await?;
                let mut fresh = RouteEntry::new(key, &new_session_id(), now, origin_json(source));
                fresh.set("was_auto_reset", json!(true));
                fresh.set("auto_reset_reason", json!(reason.code()));
                fresh.set("reset_had_activity", json!(true));
                self.routing.save(&self.store, fresh.clone()).await?;
                let notify = policy.notify
                    && !policy
                        .notify_exclude_platforms
                        .iter()
                        .any(|p| p == &source.platform);
                return Ok((fresh, notify.then_some(reason)));
            }
            entry.updated_at = now;
            self.routing.save(&self.store, entry.clone()).await?;
            return Ok((entry, None));
        }
        let entry = RouteEntry::new(key, &new_session_id(), now, origin_json(source));
        self.routing.save(&self.store, entry.clone()).await?;
        Ok((entry, None))
    }

    /// A conversation stored under the key Hermes built from a username
    /// (`session_key::legacy_session_key`) continues under the stable-id key — only when the
    /// stored entry was recorded for this same user id, so whoever takes over a recycled
    /// username starts afresh instead.
    async fn adopt_legacy_route(&self, key: &str, source: &SessionSource) -> StoreResult<()> {
        // Only the chat's own key takes its conversation over, never a background task's.
        if key != crate::gateway::session_key::build_session_key(source, self.key_policy, None) {
            return Ok(());
        }
        let Some(legacy) = legacy_session_key(source, self.key_policy, None) else {
            return Ok(());
        };
        let Some(entry) = self.routing.get(&legacy) else {
            return Ok(());
        };
        if !same_person(entry.fields.get("origin"), source) {
            tracing::info!(platform = %source.platform, chat_id = %source.chat_id,
                "a session stored under this username belongs to another user id; not taken over");
            return Ok(());
        }
        if self.routing.rename(&self.store, &legacy, key).await? {
            tracing::info!(session_id = %entry.session_id, "session moved from its username key to its user-id key");
        }
        Ok(())
    }

    /// Points `key` at `session_id` (a `/new`, `/resume` or compression continuation).
    pub(super) async fn repoint(
        &self,
        key: &str,
        source: &SessionSource,
        session_id: &str,
        fresh_reset: bool,
    ) -> StoreResult<RouteEntry> {
        let mut entry = self
            .routing
            .get(key)
            .unwrap_or_else(|| RouteEntry::new(key, session_id, now_epoch(), origin_json(source)));
        entry.session_id = session_id.to_owned();
        entry.updated_at = now_epoch();
        entry.set("is_fresh_reset", json!(fresh_reset));
        if fresh_reset {
            // A new conversation starts on the configured model, as Hermes's reset does.
            entry.fields.remove("model_override");
        }
        self.routing.save(&self.store, entry.clone()).await?;
        Ok(entry)
    }

    /// The model (and provider) `/model` chose for the session at `key`, if any. A record
    /// marked `listed` (our own addition; Hermes reads only model, provider and base_url)
    /// names a model found in the listing of the server at its `base_url`.
    pub(super) fn model_choice(&self, key: &str) -> Option<ModelChoice> {
        let entry = self.routing.get(key)?;
        let record = entry.fields.get(OVERRIDE_FIELD)?;
        let text = |name: &str| {
            record
                .get(name)
                .and_then(|v| v.as_str())
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let listed = record.get(LISTED_FIELD).and_then(|v| v.as_bool()) == Some(true);
        Some(ModelChoice {
            model: record.get("model")?.as_str()?.to_owned(),
            provider: text("provider"),
            listed_by: text("base_url").filter(|_| listed),
        })
    }

    /// The session id an event's turn runs in, without side effects (for `/status`).
    pub(super) fn current_session_id(&self, key: &str) -> Option<String> {
        self.routing.get(key).map(|e| e.session_id)
    }

    /// The agent for this event's session: the slot's cached one when it is still the
    /// routed session, else loaded from state.db (or created).
    pub(super) async fn prepare_agent(
        &self,
        config: &Config,
        slot: &Arc<Slot>,
        source: &SessionSource,
        deps: &Arc<AgentDeps>,
        resumed: bool,
        model: Option<&str>,
    ) -> Result<Prepared, AgentError> {
        if source.platform == API_PLATFORM {
            let agent = self
                .load_or_create(deps, &source.chat_id, source, model)
                .await?;
            return Ok(Prepared {
                agent,
                notice: None,
            });
        }
        let (entry, reset) = self.route(config, &slot.key, source, !resumed).await?;
        let cached = slot.lock().agent.take();
        let agent = match cached {
            // An agent built before a reload changed the model is reloaded from state.db.
            Some(agent)
                if agent.session_id() == entry.session_id
                    && Arc::ptr_eq(agent.deps_arc(), deps) =>
            {
                agent
            }
            _ => {
                self.load_or_create(deps, &entry.session_id, source, model)
                    .await?
            }
        };
        Ok(Prepared {
            agent,
            notice: reset.map(|r| reset_notice(&r)),
        })
    }

    async fn load_or_create(
        &self,
        deps: &Arc<AgentDeps>,
        session_id: &str,
        source: &SessionSource,
        model: Option<&str>,
    ) -> Result<Agent, AgentError> {
        match Agent::resume(deps.clone(), session_id.to_owned()).await {
            Ok(agent) => Ok(agent),
            Err(AgentError::Store(StoreError::SessionNotFound(_))) => {
                Agent::create_for_model(
                    deps.clone(),
                    session_id.to_owned(),
                    &source.platform,
                    source.user_id.clone(),
                    model,
                )
                .await
            }
            Err(e) => Err(e),
        }
    }
}

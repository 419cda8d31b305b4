//! `/model`: show the session's model and the configured ones, switch this session to
//! another configured model (kept in the session's routing entry as Hermes's
//! `model_override`, so a restart keeps it), or with `--global` also make it
//! `model.default` in config.yaml. A model no endpoint serves is refused with the list.

use std::sync::Arc;

use hermes_adapter::MessageEvent;
use serde_json::json;

use super::Router;
use super::slot::Slot;
use crate::agent::AgentDeps;
use crate::agent::provider::Endpoint;

/// The routing-entry field Hermes keeps a session's `/model` choice in (without secrets).
const OVERRIDE_FIELD: &str = "model_override";

impl Router {
    /// The model `/model` chose for the session at `key`, if any.
    pub(super) fn session_model(&self, key: &str) -> Option<String> {
        let entry = self.routing.get(key)?;
        entry
            .fields
            .get(OVERRIDE_FIELD)?
            .get("model")?
            .as_str()
            .map(str::to_owned)
    }

    pub(super) async fn model_command(
        &self,
        slot: &Arc<Slot>,
        event: &MessageEvent,
        args: &str,
    ) -> String {
        let deps = match &self.live().agent {
            Ok(deps) => deps.clone(),
            Err(reason) => return format!("No model is configured: {reason}"),
        };
        let configured = deps.client.configured_models();
        let mut global = false;
        let mut wanted: Option<&str> = None;
        for word in args.split_whitespace() {
            match word {
                "--global" => global = true,
                "--session" => {}
                flag if flag.starts_with("--") => {
                    return format!(
                        "`/model` takes a model name and optionally `--global`; `{flag}` is not supported."
                    );
                }
                name if wanted.is_none() => wanted = Some(name),
                _ => return "Usage: `/model [name] [--global]`".to_owned(),
            }
        }
        let current = self
            .session_model(&slot.key)
            .filter(|m| configured.contains(m))
            .unwrap_or_else(|| deps.model_name());
        let Some(wanted) = wanted else {
            return format!(
                "**Model:** `{current}`\n{}\nSwitch this chat with `/model <name>`; add `--global` to make it the default in config.yaml.",
                listing(&configured)
            );
        };
        if !configured.iter().any(|m| m == wanted) {
            return format!(
                "`{wanted}` is not a configured model, so I can't switch to it.\n{}\nOther models are added as `model.default` or `fallback_providers` in config.yaml.",
                listing(&configured)
            );
        }
        let endpoint = deps
            .client
            .endpoints()
            .iter()
            .find(|e| e.model == wanted)
            .cloned();
        let saved = self
            .save_session_model(&slot.key, event, wanted, endpoint.as_ref())
            .await;
        if let Err(e) = saved {
            tracing::error!(session_key = %slot.key, error = %e, "cannot save the model choice");
            return "⚠️ The model choice could not be saved; nothing was changed.".to_owned();
        }
        let mut reply = format!("✅ This chat now uses `{wanted}` (was `{current}`).");
        if global {
            match save_global(&deps, &self.home.config_yaml(), endpoint.as_ref(), wanted) {
                Ok(()) => reply.push_str(
                    "\nSaved as `model.default` in config.yaml: other chats switch after a reload \
                     (`systemctl reload hermesd` or SIGHUP).",
                ),
                Err(e) => {
                    tracing::error!(error = %e, "cannot write model.default to config.yaml");
                    reply.push_str(&format!(
                        "\n⚠️ config.yaml was not changed ({e}); only this chat switched."
                    ));
                }
            }
        }
        reply
    }

    async fn save_session_model(
        &self,
        key: &str,
        event: &MessageEvent,
        model: &str,
        endpoint: Option<&Endpoint>,
    ) -> crate::state::StoreResult<()> {
        let (mut entry, _) = self.route(key, &event.source, false).await?;
        let mut record = json!({"model": model});
        if let Some(endpoint) = endpoint {
            record["provider"] = json!(endpoint.provider);
            record["base_url"] = json!(endpoint.base_url);
        }
        entry.set(OVERRIDE_FIELD, record);
        self.routing.save(&self.store, entry).await
    }
}

fn listing(configured: &[String]) -> String {
    let names: Vec<String> = configured.iter().map(|m| format!("`{m}`")).collect();
    format!("Configured models: {}", names.join(", "))
}

/// Writes `model.default` (and the provider and base URL when the model is served by
/// another provider than the primary) into config.yaml, atomically, keeping its mode.
fn save_global(
    deps: &AgentDeps,
    path: &std::path::Path,
    endpoint: Option<&Endpoint>,
    model: &str,
) -> Result<(), String> {
    use serde_norway::{Mapping, Value as Yaml};
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut doc: Yaml = if text.trim().is_empty() {
        Yaml::Mapping(Mapping::new())
    } else {
        serde_norway::from_str(&text).map_err(|e| format!("config.yaml is not valid YAML: {e}"))?
    };
    let root = doc.as_mapping_mut().ok_or("config.yaml is not a mapping")?;
    let model_key = Yaml::String("model".into());
    let block = match root.get(&model_key) {
        Some(Yaml::Mapping(map)) => map.clone(),
        _ => Mapping::new(),
    };
    let mut block = block;
    block.insert(Yaml::String("default".into()), Yaml::String(model.into()));
    let primary_provider = deps.client.endpoints().first().map(|e| e.provider.clone());
    if let Some(endpoint) = endpoint
        && Some(&endpoint.provider) != primary_provider.as_ref()
    {
        block.insert(
            Yaml::String("provider".into()),
            Yaml::String(endpoint.provider.clone()),
        );
        block.insert(
            Yaml::String("base_url".into()),
            Yaml::String(endpoint.base_url.clone()),
        );
    }
    root.insert(model_key, Yaml::Mapping(block));
    let out = serde_norway::to_string(&doc).map_err(|e| e.to_string())?;
    let mode = file_mode(path);
    crate::tools::approval::write_atomically(path, out.as_bytes(), mode)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(unix)]
fn file_mode(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn file_mode(_path: &std::path::Path) -> Option<u32> {
    None
}

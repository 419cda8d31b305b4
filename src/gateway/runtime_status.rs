//! `$HERMES_HOME/gateway_state.json`: the runtime status a Python `hermes gateway status`
//! (or dashboard) reads, in the reference's shape. Every update rewrites the whole document
//! atomically (temp file + rename), so readers never see a torn file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::lock_record::{ProcessRecord, utc_now_iso, write_json_atomic};

pub const RUNTIME_STATUS_FILE: &str = "gateway_state.json";

/// `gateway_state`, spelled as Python spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GatewayState {
    Starting,
    Running,
    Draining,
    Stopped,
}

/// One platform's entry under `platforms`. `state` is free text in the reference
/// (`connecting`, `connected`, `fatal`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlatformStatus {
    pub state: String,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub updated_at: String,
}

/// The whole document, fields in the reference's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeStatusDoc {
    #[serde(flatten)]
    pub process: ProcessRecord,
    pub gateway_state: GatewayState,
    pub exit_reason: Option<String>,
    pub restart_requested: bool,
    pub active_agents: u64,
    pub platforms: BTreeMap<String, PlatformStatus>,
    pub updated_at: String,
}

/// The writer; cheap to share behind an `Arc`. Writes are small and synchronous.
#[derive(Debug)]
pub struct RuntimeStatus {
    path: PathBuf,
    doc: Mutex<RuntimeStatusDoc>,
}

impl RuntimeStatus {
    /// Writes a fresh `starting` document for this process.
    pub fn create(home: &Path, argv: &[String]) -> std::io::Result<Self> {
        let status = Self {
            path: home.join(RUNTIME_STATUS_FILE),
            doc: Mutex::new(RuntimeStatusDoc {
                process: ProcessRecord::current(argv),
                gateway_state: GatewayState::Starting,
                exit_reason: None,
                restart_requested: false,
                active_agents: 0,
                platforms: BTreeMap::new(),
                updated_at: utc_now_iso(),
            }),
        };
        status.update(|_| {})?;
        Ok(status)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A copy of what was last written.
    pub fn snapshot(&self) -> RuntimeStatusDoc {
        self.lock().clone()
    }

    pub fn set_state(&self, state: GatewayState, exit_reason: Option<&str>) -> std::io::Result<()> {
        self.update(|doc| {
            doc.gateway_state = state;
            doc.exit_reason = exit_reason.map(str::to_owned);
        })
    }

    pub fn set_restart_requested(&self, requested: bool) -> std::io::Result<()> {
        self.update(|doc| doc.restart_requested = requested)
    }

    pub fn set_active_agents(&self, count: u64) -> std::io::Result<()> {
        self.update(|doc| doc.active_agents = count)
    }

    /// Records a platform's state; `error` is `(code, message)` and must carry no secrets.
    pub fn set_platform(
        &self,
        platform: &str,
        state: &str,
        error: Option<(&str, &str)>,
    ) -> std::io::Result<()> {
        self.update(|doc| {
            doc.platforms.insert(
                platform.to_owned(),
                PlatformStatus {
                    state: state.to_owned(),
                    error_code: error.map(|(code, _)| code.to_owned()),
                    error_message: error.map(|(_, message)| message.to_owned()),
                    updated_at: utc_now_iso(),
                },
            );
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RuntimeStatusDoc> {
        // A panic mid-update leaves a whole document behind (updates only assign fields).
        self.doc
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies `change` and writes the document while holding the mutex, so concurrent
    /// updates reach the file in the order they were applied.
    fn update(&self, change: impl FnOnce(&mut RuntimeStatusDoc)) -> std::io::Result<()> {
        let mut doc = self.lock();
        change(&mut doc);
        doc.updated_at = utc_now_iso();
        write_json_atomic(&self.path, &*doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::process_info;

    #[test]
    fn writes_the_reference_shape() {
        let home = tempfile::tempdir().expect("tempdir");
        let argv = vec!["hermesd".to_owned(), "run".to_owned()];
        let status = RuntimeStatus::create(home.path(), &argv).expect("create");
        status
            .set_platform("telegram", "connected", None)
            .expect("platform");
        status
            .set_platform(
                "discord",
                "fatal",
                Some(("auth_failed", "401 Unauthorized")),
            )
            .expect("platform");
        status.set_active_agents(2).expect("agents");
        status
            .set_state(GatewayState::Running, None)
            .expect("running");

        let raw = std::fs::read_to_string(home.path().join("gateway_state.json")).expect("read");
        let value: serde_json::Value = serde_json::from_str(&raw).expect("json");
        let object = value.as_object().expect("object");
        let keys: Vec<&str> = object.keys().map(String::as_str).collect();
        let mut expected = vec![
            "pid",
            "kind",
            "argv",
            "start_time",
            "gateway_state",
            "exit_reason",
            "restart_requested",
            "active_agents",
            "platforms",
            "updated_at",
        ];
        expected.sort_unstable();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, expected);
        assert_eq!(value["pid"], process_info::current_pid());
        assert_eq!(value["kind"], "hermes-gateway");
        assert_eq!(value["argv"], serde_json::json!(["hermesd", "run"]));
        assert_eq!(value["gateway_state"], "running");
        assert_eq!(value["exit_reason"], serde_json::Value::Null);
        assert_eq!(value["restart_requested"], false);
        assert_eq!(value["active_agents"], 2);
        assert_eq!(value["platforms"]["telegram"]["state"], "connected");
        assert_eq!(
            value["platforms"]["telegram"]["error_code"],
            serde_json::Value::Null
        );
        assert_eq!(value["platforms"]["discord"]["error_code"], "auth_failed");
        assert_eq!(
            value["platforms"]["discord"]["error_message"],
            "401 Unauthorized"
        );
        for stamp in [
            &value["updated_at"],
            &value["platforms"]["telegram"]["updated_at"],
        ] {
            assert!(
                stamp.as_str().is_some_and(|s| s.ends_with("+00:00")),
                "{stamp}"
            );
        }

        status
            .set_state(GatewayState::Stopped, Some("sigterm"))
            .expect("stopped");
        let doc: RuntimeStatusDoc =
            serde_json::from_str(&std::fs::read_to_string(status.path()).expect("read"))
                .expect("round trip");
        assert_eq!(doc.gateway_state, GatewayState::Stopped);
        assert_eq!(doc.exit_reason.as_deref(), Some("sigterm"));
        assert_eq!(doc, status.snapshot());
    }

    #[test]
    fn reads_the_observed_python_document() {
        let observed = r#"{"pid":4761,"kind":"hermes-gateway","argv":["hermes","gateway","run"],"start_time":35533,"gateway_state":"running","exit_reason":null,"restart_requested":false,"active_agents":0,"platforms":{"telegram":{"state":"connected","error_code":null,"error_message":null,"updated_at":"2025-06-01T10:00:00.000001+00:00"}},"updated_at":"2025-06-01T10:00:00.000002+00:00"}"#;
        let doc: RuntimeStatusDoc = serde_json::from_str(observed).expect("parses");
        assert_eq!(doc.process.pid, 4761);
        assert_eq!(doc.gateway_state, GatewayState::Running);
        assert_eq!(doc.platforms["telegram"].state, "connected");
    }
}

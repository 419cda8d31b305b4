//! Gateway event hooks: `$HERMES_HOME/hooks/<name>/HOOK.yaml` (`name`, `description`,
//! `events`, optional `timeout` in seconds) beside a handler, run as a subprocess for each
//! event it lists (Hermes's `gateway/hooks.py` loads the handler into its own process; we do
//! not run Python inside the daemon):
//!
//! - `handler.py` runs through `python3` and a small runner that imports it and calls its
//!   `handle(event_type, context)` (a coroutine is awaited), with the context read from stdin;
//! - an executable `handler` (any language) runs directly with argv[1] = the event and, on
//!   stdin, `{"event": "<event>", "context": {...}}`.
//!
//! Events: `gateway:startup`, `session:start`, `session:end`, `session:reset`, `agent:start`,
//! `agent:step`, `agent:end` and `command:<name>`; a hook may list `<kind>:*` to get every
//! event of a kind. Handlers run one at a time, in order, off the gateway's path: an error or
//! a hang (killed at its timeout) is logged and never delays a reply. Like shell hooks, a
//! handler runs only with the operator's consent, recorded in the same allowlist under the
//! event `gateway_hook` and the handler's path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::allowlist;
use super::spawn::{RunOutcome, run};
use crate::home::HermesHome;

/// The allowlist event under which gateway hooks are approved.
pub const CONSENT_EVENT: &str = "gateway_hook";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_TIMEOUT_SECS: u64 = 300;
/// Events waiting for their handlers beyond this are dropped (with a warning).
const QUEUE: usize = 256;

/// Imports the handler file named by argv[1] and calls `handle(argv[2], <stdin JSON>)`.
const PYTHON_RUNNER: &str = r#"
import asyncio, importlib.util, json, sys
path, event = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("hermesd_gateway_hook", path)
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
result = module.handle(event, json.load(sys.stdin))
if asyncio.iscoroutine(result):
    asyncio.run(result)
"#;

/// One hook found in the home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayHook {
    pub name: String,
    pub dir: PathBuf,
    pub events: Vec<String>,
    /// `handler.py` or `handler`.
    pub handler: PathBuf,
    pub timeout: Duration,
    pub approved: bool,
}

impl GatewayHook {
    /// The allowlist's "command" for this hook: its handler's path.
    pub fn consent_key(&self) -> String {
        self.handler.display().to_string()
    }

    fn wants(&self, event: &str) -> bool {
        let wildcard = event.split_once(':').map(|(kind, _)| format!("{kind}:*"));
        self.events
            .iter()
            .any(|e| e == event || Some(e) == wildcard.as_ref())
    }
}

/// The hooks under `$HERMES_HOME/hooks`, in name order; a directory that is not a usable
/// hook is reported and skipped.
pub fn discover(home: &HermesHome) -> Vec<GatewayHook> {
    let root = home.path().join("hooks");
    let Ok(dirs) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = dirs.flatten().map(|e| e.path()).collect();
    dirs.sort();
    let approvals = allowlist::approvals(home);
    dirs.into_iter()
        .filter(|dir| dir.is_dir() && dir.join("HOOK.yaml").is_file())
        .filter_map(|dir| match read_hook(&dir) {
            Ok(mut hook) => {
                let key = hook.consent_key();
                hook.approved = approvals
                    .iter()
                    .any(|a| a.event == CONSENT_EVENT && a.command == key);
                Some(hook)
            }
            Err(why) => {
                tracing::warn!(hook = %dir.display(), "gateway hook skipped: {why}");
                None
            }
        })
        .collect()
}

fn read_hook(dir: &Path) -> Result<GatewayHook, String> {
    let text = std::fs::read_to_string(dir.join("HOOK.yaml")).map_err(|e| e.to_string())?;
    let manifest: Value =
        serde_norway::from_str(&text).map_err(|e| format!("HOOK.yaml is not valid YAML: {e}"))?;
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = manifest
        .get("name")
        .and_then(Value::as_str)
        .map_or(dir_name, str::to_owned);
    let events: Vec<String> = match manifest.get("events") {
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    };
    if events.is_empty() {
        return Err("HOOK.yaml lists no events".to_owned());
    }
    let timeout = match manifest.get("timeout").and_then(Value::as_u64) {
        Some(secs) => Duration::from_secs(secs.clamp(1, MAX_TIMEOUT_SECS)),
        None => DEFAULT_TIMEOUT,
    };
    let handler = ["handler.py", "handler"]
        .into_iter()
        .map(|file| dir.join(file))
        .find(|path| path.is_file())
        .ok_or("no handler.py or handler next to HOOK.yaml")?;
    Ok(GatewayHook {
        name,
        dir: dir.to_path_buf(),
        events,
        handler,
        timeout,
        approved: false,
    })
}

/// Fires gateway events at the approved hooks, in order, on a task of their own.
#[derive(Clone, Debug, Default)]
pub struct EventHooks {
    queue: Option<mpsc::Sender<(String, Value)>>,
}

impl EventHooks {
    /// No hooks: every event is dropped at once.
    pub fn none() -> Self {
        Self::default()
    }

    /// Finds the hooks, reports those without consent, and starts the task that runs the
    /// approved ones (must be called inside the runtime).
    /// `auto_accept` (`hooks_auto_accept`) approves, and records, the hooks not yet approved.
    pub fn start(home: &HermesHome, env: &BTreeMap<String, String>, auto_accept: bool) -> Self {
        let mut hooks = discover(home);
        for hook in &mut hooks {
            if !hook.approved && auto_accept {
                if let Err(error) =
                    allowlist::approve(home, CONSENT_EVENT, &hook.consent_key(), None)
                {
                    tracing::warn!(hook = %hook.name, %error, "gateway hook approved by hooks_auto_accept, but the approval could not be recorded");
                }
                hook.approved = true;
            }
            if hook.approved {
                tracing::info!(hook = %hook.name, events = ?hook.events, "gateway hook loaded");
            } else {
                tracing::warn!(hook = %hook.name, handler = %hook.handler.display(),
                    "gateway hook not run: the operator has not approved it (`hermesd hooks accept`)");
            }
        }
        hooks.retain(|hook| hook.approved);
        if hooks.is_empty() {
            return Self::none();
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("gateway hooks not started: no async runtime");
            return Self::none();
        };
        let env = crate::process::command_env(env, home);
        let (sender, mut receiver) = mpsc::channel::<(String, Value)>(QUEUE);
        runtime.spawn(async move {
            while let Some((event, context)) = receiver.recv().await {
                for hook in hooks.iter().filter(|hook| hook.wants(&event)) {
                    run_handler(hook, &event, &context, &env).await;
                }
            }
        });
        Self {
            queue: Some(sender),
        }
    }

    /// Queues `event` with its `context`; never waits.
    pub fn emit(&self, event: &str, context: Value) {
        let Some(queue) = &self.queue else { return };
        if queue.try_send((event.to_owned(), context)).is_err() {
            tracing::warn!(%event, "gateway hook event dropped: the hooks are too far behind");
        }
    }
}

async fn run_handler(
    hook: &GatewayHook,
    event: &str,
    context: &Value,
    env: &BTreeMap<String, String>,
) {
    let quote = |text: &str| crate::process::shell_quote(text);
    let handler = hook.handler.display().to_string();
    let (command, stdin) = if hook.handler.extension().is_some_and(|e| e == "py") {
        (
            format!(
                "python3 -c {} {} {}",
                quote(PYTHON_RUNNER),
                quote(&handler),
                quote(event)
            ),
            context.to_string(),
        )
    } else {
        (
            format!("{} {}", quote(&handler), quote(event)),
            json!({"event": event, "context": context}).to_string(),
        )
    };
    match run(&command, &stdin, env, &hook.dir, hook.timeout).await {
        RunOutcome::Exited { code: 0, .. } => {
            tracing::info!(hook = %hook.name, %event, "gateway hook ran");
        }
        RunOutcome::Exited { code, stderr, .. } => {
            let stderr: String = stderr.trim().chars().take(400).collect();
            tracing::warn!(hook = %hook.name, %event, code, %stderr, "gateway hook failed");
        }
        RunOutcome::TimedOut => {
            tracing::warn!(hook = %hook.name, %event, timeout_secs = hook.timeout.as_secs(),
                "gateway hook killed at its timeout");
        }
        RunOutcome::NotStarted(error) => {
            tracing::warn!(hook = %hook.name, %event, %error, "gateway hook could not be started");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_hook(home: &Path, name: &str, manifest: &str, handler: &str, body: &str) {
        let dir = home.join("hooks").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("HOOK.yaml"), manifest).unwrap();
        let path = dir.join(handler);
        std::fs::write(&path, body).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn hooks_are_found_with_their_events_and_consent() {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::at(dir.path());
        write_hook(
            dir.path(),
            "a",
            "name: audit\nevents: [agent:start, command:*]\n",
            "handler",
            "",
        );
        write_hook(dir.path(), "b", "events: []\n", "handler", "");
        write_hook(
            dir.path(),
            "c",
            "events: [agent:end]\ntimeout: 5\n",
            "handler.py",
            "",
        );
        let hooks = discover(&home);
        assert_eq!(hooks.len(), 2, "a hook without events is skipped");
        assert_eq!(hooks[0].name, "audit");
        assert!(hooks[0].wants("command:new") && hooks[0].wants("agent:start"));
        assert!(!hooks[0].wants("agent:end") && !hooks[0].wants("command"));
        assert_eq!(hooks[1].name, "c");
        assert_eq!(hooks[1].timeout, Duration::from_secs(5));
        assert!(hooks.iter().all(|h| !h.approved));
        allowlist::approve(&home, CONSENT_EVENT, &hooks[1].consent_key(), None).unwrap();
        let hooks = discover(&home);
        assert!(!hooks[0].approved && hooks[1].approved);
    }

    #[tokio::test]
    async fn a_python_handler_gets_the_event_and_context() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.json");
        let body = format!(
            "import json\nasync def handle(event_type, context):\n    \
             open({:?}, 'w').write(json.dumps([event_type, context]))\n",
            out.display().to_string()
        );
        write_hook(
            dir.path(),
            "py",
            "events: [agent:end]\n",
            "handler.py",
            &body,
        );
        let hook = discover(&HermesHome::at(dir.path())).remove(0);
        let env = BTreeMap::from([("PATH".to_owned(), "/usr/bin:/bin".to_owned())]);
        run_handler(&hook, "agent:end", &json!({"response": "hi"}), &env).await;
        let seen: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
        assert_eq!(seen, json!(["agent:end", {"response": "hi"}]));
    }
}

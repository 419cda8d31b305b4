//! The approval gate every terminal command passes (Python `check_all_command_guards` on the
//! gateway path): hardline floor, `sudo -S` guard and deny rules first, then the `off` mode,
//! the permanent allowlist and session approvals, and finally a prompt to the user through a
//! callback — once / session / always / deny, failing closed after `approvals.timeout`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::allowlist::{AllowlistChange, append_to_command_allowlist};
use super::detect::{Assessment, DangerMatch, SUDO_STDIN_DESCRIPTION, assess, detect_sudo_stdin};
use super::normalize::DetectionEnv;
use super::patterns::{DANGEROUS, REMOVED_PATTERN_KEY_ALIASES, legacy_pattern_key};
use crate::config::ApprovalMode;
use crate::tools::fnmatch::fnmatchcase;

/// What the user is asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    pub session_id: String,
    pub command: String,
    pub description: String,
    pub pattern_key: String,
    pub pattern_keys: Vec<String>,
    /// Whether to offer "always".
    pub allow_permanent: bool,
}

/// The user's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalDecision {
    /// Run this command only.
    Once,
    /// Allow this pattern for the rest of the session.
    Session,
    /// Allow this pattern from now on (persisted to `command_allowlist`).
    Always,
    Deny,
}

/// Asks the user; the platform layer implements it (buttons, `/approve`, ...).
pub type ApprovalPrompt =
    Arc<dyn Fn(ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> + Send + Sync>;

/// The gate's verdict on a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// Not dangerous, allowlisted, approved earlier, or approvals are off.
    Allowed,
    /// Dangerous, and the user approved it just now.
    Approved { description: String },
    /// Refused: hardline, deny rule, `sudo -S`, or the user said no. The text is for the model.
    Denied(String),
    /// No answer in time (or the prompt could not be delivered): fail closed.
    Blocked(String),
}

impl ApprovalOutcome {
    pub fn is_allowed(&self) -> bool {
        matches!(
            self,
            ApprovalOutcome::Allowed | ApprovalOutcome::Approved { .. }
        )
    }
}

/// How the gate is configured (`approvals.*`, `command_allowlist`).
#[derive(Debug, Clone)]
pub struct ApprovalSettings {
    pub mode: ApprovalMode,
    /// How long to wait for the user (`approvals.timeout`, default 60 s).
    pub timeout: Duration,
    /// Pattern keys and command globs approved permanently.
    pub command_allowlist: Vec<String>,
    /// Globs that block a command whatever the mode (`approvals.deny`).
    pub deny: Vec<String>,
    /// Where "always" answers are persisted.
    pub config_path: PathBuf,
    pub detection: DetectionEnv,
    /// `SUDO_PASSWORD` is configured, so the agent's own `sudo -S` is legitimate.
    pub sudo_password_configured: bool,
}

impl ApprovalSettings {
    /// The settings a daemon runs with: `approvals.*` and `command_allowlist` from the
    /// validated config, "always" answers persisted to the home's `config.yaml`, and home
    /// folding and the `SUDO_PASSWORD` check taken from `env`.
    pub fn from_config(
        config: &crate::config::Config,
        home: &crate::home::HermesHome,
        env: &std::collections::BTreeMap<String, String>,
    ) -> Self {
        let user_home = env
            .get("HOME")
            .filter(|h| !h.is_empty())
            .map(std::path::Path::new);
        let temp_dir = env
            .get("TMPDIR")
            .filter(|t| t.starts_with('/'))
            .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
        Self {
            mode: config.approvals.mode,
            timeout: Duration::from_secs(config.approvals.timeout_secs),
            command_allowlist: config.command_allowlist.clone(),
            deny: config.approvals.deny.clone(),
            config_path: home.config_yaml(),
            detection: DetectionEnv::new(user_home, Some(home.path()), &temp_dir),
            sudo_password_configured: env.get("SUDO_PASSWORD").is_some_and(|p| !p.is_empty()),
        }
    }

    pub fn new(config_path: impl Into<PathBuf>) -> Self {
        Self {
            mode: ApprovalMode::Manual,
            timeout: Duration::from_secs(60),
            command_allowlist: Vec::new(),
            deny: Vec::new(),
            config_path: config_path.into(),
            detection: DetectionEnv::default(),
            sudo_password_configured: false,
        }
    }
}

const TIMEOUT_MESSAGE: &str = "BLOCKED: no answer from the user in time, so the command did not run. No answer means no. Do not run it again, reworded, or any other way to the same effect; pause this work and take no destructive or irreversible step until the user replies.";
const DENIED_MESSAGE: &str = "BLOCKED: the user refused this command. Do not run it again, reworded, or any other way to the same effect; pause this work and take no destructive or irreversible step until the user replies.";
const NOTIFY_FAILED_MESSAGE: &str =
    "BLOCKED: the approval request could not reach the user. Do not try again.";

fn hardline_message(description: &str) -> String {
    format!(
        "BLOCKED (hardline): {description}. The agent never runs this, whatever the approval settings (--yolo, /yolo, approvals.mode=off, cron approve mode). Someone who really wants it must run it outside the agent."
    )
}

fn sudo_stdin_message() -> String {
    format!(
        "BLOCKED: {SUDO_STDIN_DESCRIPTION}. Piping candidate passwords into 'sudo -S' is how they get guessed, so it never runs. If the agent needs sudo, set SUDO_PASSWORD in .env; otherwise the user runs the command."
    )
}

fn deny_rule_message(pattern: &str) -> String {
    format!(
        "BLOCKED: the user forbade commands matching '{pattern}' (approvals.deny in config.yaml); no approval setting overrides that (--yolo, /yolo, approvals.mode=off). Do not run it again in any form."
    )
}

/// Every key an approval may be stored under for `key`: the description and the legacy
/// regex-derived key (older `command_allowlist` entries), both ways round.
fn key_aliases(key: &str) -> Vec<String> {
    let mut aliases = vec![key.to_owned()];
    for pattern in DANGEROUS.iter() {
        let legacy = legacy_pattern_key(&pattern.source);
        if pattern.description == key || legacy == key {
            aliases.push(pattern.description.to_owned());
            aliases.push(legacy);
        }
    }
    for (canonical, legacy) in REMOVED_PATTERN_KEY_ALIASES {
        if canonical == key || legacy == key {
            aliases.push(canonical.to_owned());
            aliases.push(legacy.to_owned());
        }
    }
    aliases
}

/// Shared approval state: one gate per process; sessions are keyed by id.
pub struct ApprovalGate {
    settings: ApprovalSettings,
    prompt: Option<ApprovalPrompt>,
    session_approved: Mutex<HashMap<String, HashSet<String>>>,
    permanent: Mutex<BTreeSet<String>>,
    /// Sessions whose user turned prompts off with `/yolo` (kept in memory, as Hermes does).
    yolo: Mutex<HashSet<String>>,
    /// Serialises config.yaml edits.
    persist: tokio::sync::Mutex<()>,
}

impl fmt::Debug for ApprovalGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalGate")
            .field("mode", &self.settings.mode)
            .field("timeout", &self.settings.timeout)
            .field("has_prompt", &self.prompt.is_some())
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ApprovalGate {
    /// `prompt: None` means no user can be asked: dangerous commands are blocked.
    pub fn new(settings: ApprovalSettings, prompt: Option<ApprovalPrompt>) -> Self {
        let permanent = settings.command_allowlist.iter().cloned().collect();
        Self {
            settings,
            prompt,
            session_approved: Mutex::new(HashMap::new()),
            permanent: Mutex::new(permanent),
            yolo: Mutex::new(HashSet::new()),
            persist: tokio::sync::Mutex::new(()),
        }
    }

    pub fn mode(&self) -> ApprovalMode {
        self.settings.mode
    }

    pub fn timeout(&self) -> Duration {
        self.settings.timeout
    }

    pub fn settings(&self) -> &ApprovalSettings {
        &self.settings
    }

    /// Approves a pattern key for one session.
    pub fn approve_session(&self, session_id: &str, key: &str) {
        lock(&self.session_approved)
            .entry(session_id.to_owned())
            .or_default()
            .insert(key.to_owned());
    }

    /// Forgets a session's approvals and its `/yolo` (on `/new` or reset).
    pub fn clear_session(&self, session_id: &str) {
        lock(&self.session_approved).remove(session_id);
        lock(&self.yolo).remove(session_id);
    }

    /// `/yolo`: dangerous commands in `session_id` run without asking (`true`) or are asked
    /// about again (`false`). The hardline floor, the `sudo -S` guard and `approvals.deny`
    /// still refuse.
    pub fn set_yolo(&self, session_id: &str, on: bool) {
        let mut sessions = lock(&self.yolo);
        if on {
            sessions.insert(session_id.to_owned());
        } else {
            sessions.remove(session_id);
        }
    }

    /// Whether `/yolo` is on for `session_id`.
    pub fn is_yolo(&self, session_id: &str) -> bool {
        lock(&self.yolo).contains(session_id)
    }

    /// Sessions holding approvals in memory.
    pub fn sessions_tracked(&self) -> usize {
        lock(&self.session_approved).len()
    }

    /// Whether `key` is approved permanently or for this session.
    pub fn is_approved(&self, session_id: &str, key: &str) -> bool {
        let aliases = key_aliases(key);
        if lock(&self.permanent).iter().any(|p| aliases.contains(p)) {
            return true;
        }
        lock(&self.session_approved)
            .get(session_id)
            .is_some_and(|keys| aliases.iter().any(|a| keys.contains(a)))
    }

    /// The permanent allowlist as it stands (config entries plus "always" answers).
    pub fn permanent_allowlist(&self) -> Vec<String> {
        lock(&self.permanent).iter().cloned().collect()
    }

    /// Exact commands or globs (`podman *`) in the allowlist; compound commands never match.
    fn command_allowlisted(&self, command: &str) -> bool {
        let command = command.trim();
        if command.is_empty() || has_shell_operator(command) {
            return false;
        }
        lock(&self.permanent).iter().any(|pattern| {
            let pattern = pattern.trim();
            !pattern.is_empty()
                && (command == pattern
                    || (pattern.contains(['*', '?', '[']) && fnmatchcase(command, pattern)))
        })
    }

    fn deny_rule(&self, assessment: &Assessment) -> Option<&str> {
        let globs: Vec<&str> = self
            .settings
            .deny
            .iter()
            .map(|g| g.trim())
            .filter(|g| !g.is_empty())
            .collect();
        if globs.is_empty() {
            return None;
        }
        assessment.variants.iter().find_map(|candidate| {
            let candidate = candidate.to_lowercase();
            let candidate = candidate.trim();
            globs
                .iter()
                .find(|g| fnmatchcase(candidate, &g.to_lowercase()))
                .copied()
        })
    }

    /// Decides whether `command` may run in `session_id`, asking the user if needed.
    pub async fn check(&self, session_id: &str, command: &str) -> ApprovalOutcome {
        self.check_cancellable(session_id, command, &CancellationToken::new())
            .await
    }

    /// [`check`](Self::check), where cancelling (the user sent `/stop`) while waiting for an
    /// answer counts as a denial, as an interrupt does in Hermes.
    pub async fn check_cancellable(
        &self,
        session_id: &str,
        command: &str,
        cancel: &CancellationToken,
    ) -> ApprovalOutcome {
        self.check_in_dir(session_id, command, None, cancel).await
    }

    /// [`check_cancellable`](Self::check_cancellable) for a command that starts in `cwd`,
    /// so relative paths (`echo x >> .bashrc` run in the home) are judged where they land.
    pub async fn check_in_dir(
        &self,
        session_id: &str,
        command: &str,
        cwd: Option<&Path>,
        cancel: &CancellationToken,
    ) -> ApprovalOutcome {
        let assessment = assess(command, &self.settings.detection, cwd);
        if let Some(description) = &assessment.hardline {
            tracing::warn!(session_id, %description, "hardline block");
            return ApprovalOutcome::Denied(hardline_message(description));
        }
        if !self.settings.sudo_password_configured && detect_sudo_stdin(&assessment) {
            tracing::warn!(session_id, "sudo stdin guard block");
            return ApprovalOutcome::Denied(sudo_stdin_message());
        }
        if let Some(rule) = self.deny_rule(&assessment) {
            tracing::warn!(session_id, rule, "user deny rule block");
            return ApprovalOutcome::Denied(deny_rule_message(rule));
        }
        if self.settings.mode == ApprovalMode::Off || self.command_allowlisted(command) {
            return ApprovalOutcome::Allowed;
        }
        if self.is_yolo(session_id) {
            tracing::info!(session_id, "dangerous command runs unasked: /yolo is on");
            return ApprovalOutcome::Allowed;
        }
        let dangers = assessment.dangers;
        let Some(danger) = dangers.first().cloned() else {
            return ApprovalOutcome::Allowed;
        };
        let keys: Vec<String> = dangers.iter().map(|d| d.key.clone()).collect();
        if keys.iter().all(|key| self.is_approved(session_id, key)) {
            return ApprovalOutcome::Allowed;
        }
        tracing::info!(session_id, keys = ?keys, "command needs approval");
        let Some(prompt) = &self.prompt else {
            tracing::warn!(session_id, key = %danger.key, "no approval prompt; blocking");
            return ApprovalOutcome::Blocked(NOTIFY_FAILED_MESSAGE.to_owned());
        };
        let request = ApprovalRequest {
            session_id: session_id.to_owned(),
            command: command.to_owned(),
            description: describe(&dangers),
            pattern_key: danger.key.clone(),
            pattern_keys: keys.clone(),
            allow_permanent: true,
        };
        let asked = AssertUnwindSafe(prompt(request)).catch_unwind();
        let decision = tokio::select! {
            answer = tokio::time::timeout(self.settings.timeout, asked) => answer,
            () = cancel.cancelled() => Ok(Ok(ApprovalDecision::Deny)),
        };
        let decision = match decision {
            Err(_elapsed) => {
                tracing::info!(session_id, key = %danger.key, "approval timed out");
                return ApprovalOutcome::Blocked(TIMEOUT_MESSAGE.to_owned());
            }
            Ok(Err(_panic)) => {
                tracing::error!(session_id, "approval prompt panicked");
                return ApprovalOutcome::Blocked(NOTIFY_FAILED_MESSAGE.to_owned());
            }
            Ok(Ok(decision)) => decision,
        };
        match decision {
            ApprovalDecision::Deny => return ApprovalOutcome::Denied(DENIED_MESSAGE.to_owned()),
            ApprovalDecision::Once => {}
            ApprovalDecision::Session => {
                for key in &keys {
                    self.approve_session(session_id, key);
                }
            }
            ApprovalDecision::Always => {
                for key in &keys {
                    self.approve_session(session_id, key);
                    lock(&self.permanent).insert(key.clone());
                    self.persist_always(key).await;
                }
            }
        }
        ApprovalOutcome::Approved {
            description: describe(&dangers),
        }
    }

    async fn persist_always(&self, key: &str) {
        let _guard = self.persist.lock().await;
        let path = self.settings.config_path.clone();
        let entry = key.to_owned();
        let result =
            tokio::task::spawn_blocking(move || append_to_command_allowlist(&path, &entry)).await;
        match result {
            Ok(Ok(AllowlistChange::Added)) => tracing::info!(key, "added to command_allowlist"),
            Ok(Ok(AllowlistChange::AlreadyPresent)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "could not save the command allowlist"),
            Err(e) => tracing::warn!(error = %e, "allowlist writer task failed"),
        }
    }
}

/// What the user is shown: every reason, the first (a Hermes pattern where one applies)
/// leading.
fn describe(dangers: &[DangerMatch]) -> String {
    let all: Vec<&str> = dangers.iter().map(|d| d.description.as_str()).collect();
    all.join("; ")
}

/// Compound commands (`;`, `&&`, pipes, redirections, substitutions) never use the
/// allowlist shortcut.
fn has_shell_operator(command: &str) -> bool {
    command.contains(['\n', ';', '&', '|', '<', '>', '`']) || command.contains("$(")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_keys_alias_the_description() {
        let aliases = key_aliases("recursive delete");
        assert!(
            aliases.contains(&r"rm\s+-[^\s]*r".to_owned()),
            "{aliases:?}"
        );
        let back = key_aliases(r"rm\s+-[^\s]*r");
        assert!(back.contains(&"recursive delete".to_owned()));
        assert!(
            key_aliases("script execution via -e/-c flag")
                .contains(&r"(python[23]?|perl|ruby|node)\s+-[ec]\s+".to_owned())
        );
    }

    fn gate_in(
        dir: &std::path::Path,
        configure: impl FnOnce(&mut ApprovalSettings),
    ) -> ApprovalGate {
        let home = dir.join("home");
        let hermes = dir.join("hermes");
        std::fs::create_dir_all(&hermes).unwrap();
        let mut settings = ApprovalSettings::new(hermes.join("config.yaml"));
        settings.detection = DetectionEnv::new(Some(&home), Some(&hermes), dir);
        configure(&mut settings);
        let prompt: ApprovalPrompt =
            Arc::new(|_request| Box::pin(async { ApprovalDecision::Always }));
        ApprovalGate::new(settings, Some(prompt))
    }

    #[tokio::test]
    async fn hermes_allowlist_keys_cover_the_parsed_spellings() {
        let dir = tempfile::tempdir().unwrap();
        // An entry written by Hermes's `/approve always` for `rm -rf`.
        let gate = gate_in(dir.path(), |s| {
            s.command_allowlist = vec!["recursive delete".to_owned()];
            s.mode = ApprovalMode::Manual;
        });
        let no_prompt = ApprovalGate::new(gate.settings().clone(), None);
        for command in [
            "rm -f -r build",
            "rm -v -R build",
            "bash -c 'rm -r -f build'",
        ] {
            assert_eq!(
                no_prompt.check("s", command).await,
                ApprovalOutcome::Allowed,
                "{command}"
            );
        }
        // Not covered: a second reason the allowlist does not name.
        assert!(
            !no_prompt
                .check("s", "rm -rf build; chmod 0777 x")
                .await
                .is_allowed()
        );
        // "always" stores every key the command raised, in Hermes's spelling where Hermes has one.
        let outcome = gate
            .check("s", "chmod 0777 x && cat $HERMES_HOME/.env")
            .await;
        assert!(outcome.is_allowed(), "{outcome:?}");
        let saved = std::fs::read_to_string(&gate.settings().config_path).unwrap();
        assert!(
            saved.contains("world/other-writable permissions"),
            "{saved}"
        );
        assert!(saved.contains("read a secret file"), "{saved}");
    }

    #[tokio::test]
    async fn deny_globs_block_every_spelling_whatever_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let gate = gate_in(dir.path(), |s| {
            s.deny = vec!["git push *".to_owned(), "RM -RF *".to_owned()];
            s.mode = ApprovalMode::Off;
        });
        for command in [
            "git push origin main",
            r"g\it push origin main",
            "cd x && git push -f",
            "bash -c 'git push origin'",
            "rm -rf build",
        ] {
            match gate.check("s", command).await {
                ApprovalOutcome::Denied(message) => {
                    assert!(message.contains("approvals.deny"), "{message}");
                }
                other => panic!("{command:?}: {other:?}"),
            }
        }
        assert_eq!(
            gate.check("s", "git status").await,
            ApprovalOutcome::Allowed
        );
    }

    #[tokio::test]
    async fn yolo_skips_the_prompt_for_its_session_only_and_never_the_floor() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = ApprovalSettings::new(dir.path().join("config.yaml"));
        settings.mode = ApprovalMode::Manual;
        settings.deny = vec!["git push *".to_owned()];
        // No prompt: anything that would need one is blocked.
        let gate = ApprovalGate::new(settings, None);
        assert!(!gate.check("a", "rm -rf build").await.is_allowed());
        gate.set_yolo("a", true);
        assert!(gate.is_yolo("a"));
        assert_eq!(
            gate.check("a", "rm -rf build").await,
            ApprovalOutcome::Allowed
        );
        // Another session still asks.
        assert!(!gate.check("b", "rm -rf build").await.is_allowed());
        // The hardline floor and the deny rules hold under /yolo.
        assert!(matches!(
            gate.check("a", "rm -rf /").await,
            ApprovalOutcome::Denied(_)
        ));
        assert!(matches!(
            gate.check("a", "git push origin main").await,
            ApprovalOutcome::Denied(_)
        ));
        // Off again, and /new forgets it.
        gate.set_yolo("a", false);
        assert!(!gate.check("a", "rm -rf build").await.is_allowed());
        gate.set_yolo("a", true);
        gate.clear_session("a");
        assert!(!gate.is_yolo("a"));
    }

    #[test]
    fn compound_commands_skip_the_allowlist() {
        assert!(has_shell_operator("podman ps; rm -rf x"));
        assert!(has_shell_operator("echo $(id)"));
        assert!(!has_shell_operator("podman ps -a"));
    }
}

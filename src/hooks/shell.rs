//! The configured shell hooks of this process, after consent: [`ShellHooks::load`] keeps
//! the hooks the operator approved (or approves them all when `hooks_auto_accept` /
//! `HERMES_ACCEPT_HOOKS` says so, recording each approval as Hermes does) and reports every
//! other one once; [`ShellHooks::fire`] runs an event's hooks one after another.
//!
//! A hook that fails, exits non-zero, prints garbage or hangs past its timeout is logged and
//! otherwise ignored: the turn goes on as if it had not answered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::allowlist;
use super::spawn::{RunOutcome, run};
use super::wire::{Answer, Payload, parse_answer};
use crate::config::{HookSpec, HooksConfig};
use crate::home::HermesHome;

/// Whether a configured hook may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    Approved,
    /// Neither approved nor covered by `hooks_auto_accept`: the hook does not run.
    Missing,
}

/// Each configured hook with its consent, as `hermesd hooks list` and `doctor` show it.
pub fn consent_of(config: &HooksConfig, home: &HermesHome) -> Vec<(HookSpec, Consent)> {
    let approvals = allowlist::approvals(home);
    config
        .hooks
        .iter()
        .map(|spec| {
            let approved = approvals
                .iter()
                .any(|a| a.event == spec.event && a.command == spec.command);
            let consent = if approved {
                Consent::Approved
            } else {
                Consent::Missing
            };
            (spec.clone(), consent)
        })
        .collect()
}

/// The hooks that run in this process.
#[derive(Debug, Default)]
pub struct ShellHooks {
    active: Vec<HookSpec>,
    /// The hooks' environment: the command environment, without the daemon's secrets.
    env: BTreeMap<String, String>,
    cwd: PathBuf,
}

impl ShellHooks {
    /// No hooks (tests, and processes without a `hooks:` block).
    pub fn none() -> Self {
        Self::default()
    }

    /// The approved hooks of `config`. `env` is the loaded environment (it is stripped of
    /// secrets here); `cwd` is where hooks start.
    pub fn load(
        config: &HooksConfig,
        home: &HermesHome,
        env: &BTreeMap<String, String>,
        cwd: &Path,
    ) -> Self {
        let user_home = env.get("HOME").map(PathBuf::from);
        let mut active = Vec::new();
        for (spec, consent) in consent_of(config, home) {
            if consent == Consent::Approved {
                active.push(spec);
                continue;
            }
            if config.auto_accept {
                if let Err(error) =
                    allowlist::approve(home, &spec.event, &spec.command, user_home.as_deref())
                {
                    tracing::warn!(%error, event = %spec.event, command = %spec.command,
                        "hook approved by hooks_auto_accept, but the approval could not be recorded");
                }
                tracing::info!(event = %spec.event, command = %spec.command,
                    "hook approved by hooks_auto_accept / HERMES_ACCEPT_HOOKS");
                active.push(spec);
                continue;
            }
            tracing::warn!(event = %spec.event, command = %spec.command,
                "hook not run: the operator has not approved it (run `hermesd hooks accept`, \
                 or set hooks_auto_accept: true)");
        }
        for spec in &active {
            tracing::info!(event = %spec.event, command = %spec.command,
                matcher = spec.matcher.as_deref().unwrap_or("*"), timeout_secs = spec.timeout_secs,
                "shell hook registered");
        }
        Self {
            active,
            env: crate::process::command_env(env, home),
            cwd: cwd.to_path_buf(),
        }
    }

    /// Every hook of `config`, approved or not: for `hermesd hooks test`, where the
    /// operator runs them by hand.
    pub fn for_test(
        config: &HooksConfig,
        home: &HermesHome,
        env: &BTreeMap<String, String>,
    ) -> Self {
        Self {
            active: config.hooks.clone(),
            env: crate::process::command_env(env, home),
            cwd: env
                .get("HOME")
                .map_or_else(|| PathBuf::from("/"), PathBuf::from),
        }
    }

    /// Whether [`ShellHooks::load`] would pick the same hooks now (the config and the
    /// approvals unchanged); a reload rebuilds the hooks when not.
    pub fn is_current(&self, config: &HooksConfig, home: &HermesHome) -> bool {
        let now: Vec<HookSpec> = consent_of(config, home)
            .into_iter()
            .filter(|(_, consent)| config.auto_accept || *consent == Consent::Approved)
            .map(|(spec, _)| spec)
            .collect();
        now == self.active
    }

    /// Whether any hook listens for `event`.
    pub fn listens(&self, event: &str) -> bool {
        self.active.iter().any(|spec| spec.event == event)
    }

    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// Runs every hook of `event` (for tool events, those whose matcher takes the tool) in
    /// configuration order; returns their answers.
    pub async fn fire(&self, event: &str, payload: &Payload) -> Vec<Answer> {
        let mut answers = Vec::new();
        let tool = payload.tool_name.as_deref().unwrap_or("");
        for spec in self.active.iter().filter(|spec| spec.event == event) {
            if spec.matcher.is_some() && !spec.matches_tool(tool) {
                continue;
            }
            let mut payload = payload.clone();
            if payload.cwd.is_empty() {
                payload.cwd = self.cwd.display().to_string();
            }
            answers.push(self.run_one(spec, &payload.to_json(event)).await);
        }
        answers
    }

    /// Runs `spec` once with `stdin` and reads its answer (`hermesd hooks test` too).
    pub async fn run_one(&self, spec: &HookSpec, stdin: &str) -> Answer {
        let timeout = Duration::from_secs(spec.timeout_secs);
        let outcome = run(&spec.command, stdin, &self.env, &self.cwd, timeout).await;
        match outcome {
            RunOutcome::Exited {
                code,
                stdout,
                stderr,
            } => {
                if code != 0 {
                    let stderr: String = stderr.trim().chars().take(400).collect();
                    tracing::warn!(event = %spec.event, command = %spec.command, code, %stderr,
                        "shell hook exited with an error; its answer is still read");
                }
                parse_answer(&spec.event, &stdout)
            }
            RunOutcome::TimedOut => {
                tracing::warn!(event = %spec.event, command = %spec.command,
                    timeout_secs = spec.timeout_secs,
                    "shell hook killed at its timeout; the turn goes on without its answer");
                Answer::Nothing
            }
            RunOutcome::NotStarted(error) => {
                tracing::warn!(event = %spec.event, command = %spec.command, %error,
                    "shell hook could not be started");
                Answer::Nothing
            }
        }
    }

    /// `pre_tool_call`: the first blocking answer's reason, if any hook blocks the call.
    pub async fn block_reason(&self, payload: &Payload) -> Option<String> {
        if !self.listens("pre_tool_call") {
            return None;
        }
        self.fire("pre_tool_call", payload)
            .await
            .into_iter()
            .find_map(|answer| match answer {
                Answer::Block(reason) => Some(reason),
                _ => None,
            })
    }

    /// `pre_llm_call`: the context the hooks add, joined by blank lines.
    pub async fn context(&self, payload: &Payload) -> Option<String> {
        if !self.listens("pre_llm_call") {
            return None;
        }
        let parts: Vec<String> = self
            .fire("pre_llm_call", payload)
            .await
            .into_iter()
            .filter_map(|answer| match answer {
                Answer::Context(text) => Some(text),
                _ => None,
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// Observers (`post_tool_call`, `post_llm_call`, session events): answers are ignored.
    pub async fn notify(&self, event: &str, payload: &Payload) {
        if self.listens(event) {
            self.fire(event, payload).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(event: &str, command: &str) -> HookSpec {
        HookSpec {
            event: event.to_owned(),
            command: command.to_owned(),
            matcher: None,
            timeout_secs: 30,
        }
    }

    fn env() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
            (
                "OPENAI_API_KEY".to_owned(),
                "sk-hook-must-not-see-this-1234".to_owned(),
            ),
        ])
    }

    #[tokio::test]
    async fn a_hook_without_consent_does_not_run_and_auto_accept_records_consent() {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::at(dir.path());
        let marker = dir.path().join("ran");
        let command = format!("touch {}", marker.display());
        let mut config = HooksConfig {
            hooks: vec![spec("on_session_start", &command)],
            auto_accept: false,
        };
        let hooks = ShellHooks::load(&config, &home, &env(), dir.path());
        assert!(hooks.is_empty());
        hooks.notify("on_session_start", &Payload::default()).await;
        assert!(!marker.exists());

        config.auto_accept = true;
        let hooks = ShellHooks::load(&config, &home, &env(), dir.path());
        hooks.notify("on_session_start", &Payload::default()).await;
        assert!(marker.exists());
        config.auto_accept = false;
        assert_eq!(consent_of(&config, &home)[0].1, Consent::Approved);
    }

    #[test]
    fn a_new_approval_or_a_changed_block_makes_the_loaded_hooks_stale() {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::at(dir.path());
        let config = HooksConfig {
            hooks: vec![spec("pre_tool_call", "/bin/true")],
            auto_accept: false,
        };
        let hooks = ShellHooks::load(&config, &home, &env(), dir.path());
        assert!(hooks.is_current(&config, &home));
        allowlist::approve(&home, "pre_tool_call", "/bin/true", None).unwrap();
        assert!(
            !hooks.is_current(&config, &home),
            "the approval counts at reload"
        );
        let hooks = ShellHooks::load(&config, &home, &env(), dir.path());
        assert!(hooks.is_current(&config, &home));
        let mut changed = config.clone();
        changed.hooks[0].timeout_secs = 5;
        assert!(!hooks.is_current(&changed, &home));
    }

    #[tokio::test]
    async fn the_matcher_picks_the_tools_and_the_environment_has_no_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::at(dir.path());
        let mut guard = spec(
            "pre_tool_call",
            r#"sh -c 'env > env.txt; echo "{\"decision\": \"block\", \"reason\": \"no\"}"'"#,
        );
        guard.matcher = Some("terminal".to_owned());
        let config = HooksConfig {
            hooks: vec![guard],
            auto_accept: true,
        };
        let hooks = ShellHooks::load(&config, &home, &env(), dir.path());
        let call = |tool: &str| Payload {
            tool_name: Some(tool.to_owned()),
            ..Payload::default()
        };
        assert_eq!(hooks.block_reason(&call("read_file")).await, None);
        assert_eq!(
            hooks.block_reason(&call("terminal")).await.as_deref(),
            Some("no")
        );
        let seen = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
        assert!(!seen.contains("sk-hook-must-not-see-this"), "{seen}");
        assert!(seen.contains("HERMES_HOME="), "{seen}");
    }
}

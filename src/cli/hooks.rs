//! `hermesd hooks list|accept|revoke|test`: the operator's side of hooks. A daemon has no
//! terminal to ask at, so consent is given here (or by `hooks_auto_accept`), recorded in
//! `$HERMES_HOME/shell-hooks-allowlist.json` — the file `hermes hooks` uses — and takes
//! effect at the daemon's next start or reload.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

use super::format::table;
use super::{EXIT_FAILURE, small_runtime};
use crate::home::HermesHome;
use crate::hooks::gateway_hooks::{CONSENT_EVENT, discover};
use crate::hooks::{Answer, Consent, Payload, ShellHooks, allowlist, consent_of};

#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// List the configured shell hooks and the gateway hooks, with their consent.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Approve hooks: all not yet approved, or those running COMMAND (a gateway hook: its
    /// name). Takes effect at the daemon's next start or reload.
    Accept { command: Option<String> },
    /// Withdraw every approval of COMMAND (a gateway hook: its name or handler path).
    Revoke { command: String },
    /// Run the configured hooks of EVENT once with a sample payload and show their answers.
    Test {
        event: String,
        /// The tool name of a pre_tool_call / post_tool_call sample.
        #[arg(long, default_value = "terminal")]
        tool: String,
    },
}

/// One row of `hooks list`.
#[derive(Debug, serde::Serialize)]
struct Row {
    kind: &'static str,
    event: String,
    command: String,
    matcher: Option<String>,
    timeout_secs: u64,
    approved: bool,
}

fn rows(loaded: &crate::config::LoadedConfig, home: &HermesHome) -> Vec<Row> {
    let mut rows: Vec<Row> = consent_of(&loaded.config.hooks, home)
        .into_iter()
        .map(|(spec, consent)| Row {
            kind: "shell",
            event: spec.event,
            command: spec.command,
            matcher: spec.matcher,
            timeout_secs: spec.timeout_secs,
            approved: consent == Consent::Approved,
        })
        .collect();
    rows.extend(discover(home).into_iter().map(|hook| Row {
        kind: "gateway",
        event: hook.events.join(","),
        command: hook.consent_key(),
        matcher: None,
        timeout_secs: hook.timeout.as_secs(),
        approved: hook.approved,
    }));
    rows
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, command: HooksCommand) -> i32 {
    let mut err = std::io::stderr().lock();
    let loaded = match super::config_cmd::loaded_or_report(home, env, &mut err) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let mut out = std::io::stdout().lock();
    let user_home = loaded.env.get("HOME").map(PathBuf::from);
    match command {
        HooksCommand::List { json } => {
            let rows = rows(&loaded, home);
            let text = if json {
                serde_json::to_string_pretty(&rows).unwrap_or_default() + "\n"
            } else if rows.is_empty() {
                "no hooks configured (hooks: in config.yaml, or $HERMES_HOME/hooks/<name>/HOOK.yaml)\n"
                    .to_owned()
            } else {
                let lines: Vec<Vec<String>> = rows
                    .iter()
                    .map(|r| {
                        vec![
                            r.kind.to_owned(),
                            r.event.clone(),
                            r.command.clone(),
                            r.matcher.clone().unwrap_or_else(|| "*".to_owned()),
                            format!("{}s", r.timeout_secs),
                            if r.approved {
                                "yes"
                            } else {
                                "NO (does not run)"
                            }
                            .to_owned(),
                        ]
                    })
                    .collect();
                table(
                    &["KIND", "EVENT", "COMMAND", "MATCHER", "TIMEOUT", "APPROVED"],
                    &lines,
                )
            };
            let _ = out.write_all(text.as_bytes());
            0
        }
        HooksCommand::Accept { command } => {
            let wanted = |candidate: &str, name: &str| {
                command
                    .as_deref()
                    .is_none_or(|c| c == candidate || c == name)
            };
            let mut pairs: Vec<(String, String)> = consent_of(&loaded.config.hooks, home)
                .into_iter()
                .filter(|(spec, consent)| {
                    *consent == Consent::Missing && wanted(&spec.command, &spec.command)
                })
                .map(|(spec, _)| (spec.event, spec.command))
                .collect();
            pairs.extend(
                discover(home)
                    .into_iter()
                    .filter(|hook| !hook.approved && wanted(&hook.consent_key(), &hook.name))
                    .map(|hook| (CONSENT_EVENT.to_owned(), hook.consent_key())),
            );
            if pairs.is_empty() {
                let _ = writeln!(out, "nothing to approve");
                return 0;
            }
            for (event, command) in pairs {
                if let Err(e) = allowlist::approve(home, &event, &command, user_home.as_deref()) {
                    let _ = writeln!(err, "error: cannot record the approval: {e}");
                    return EXIT_FAILURE;
                }
                let _ = writeln!(out, "approved: {event} -> {command}");
            }
            let _ = writeln!(out, "reload or restart the daemon for it to take effect");
            0
        }
        HooksCommand::Revoke { command } => {
            let key = discover(home)
                .into_iter()
                .find(|hook| hook.name == command)
                .map_or(command, |hook| hook.consent_key());
            match allowlist::revoke(home, &key) {
                Ok(0) => {
                    let _ = writeln!(out, "no approval of {key}");
                    0
                }
                Ok(n) => {
                    let _ = writeln!(
                        out,
                        "revoked {n} approval(s) of {key}; reload or restart the daemon"
                    );
                    0
                }
                Err(e) => {
                    let _ = writeln!(err, "error: {e}");
                    EXIT_FAILURE
                }
            }
        }
        HooksCommand::Test { event, tool } => {
            let specs: Vec<_> = loaded
                .config
                .hooks
                .hooks
                .iter()
                .filter(|spec| spec.event == event)
                .cloned()
                .collect();
            if specs.is_empty() {
                let _ = writeln!(out, "no hooks configured for {event}");
                return 0;
            }
            // The operator runs these by hand: consent is theirs to give here.
            let mut config = loaded.config.hooks.clone();
            config.hooks = specs.clone();
            config.auto_accept = false;
            let runner = ShellHooks::for_test(&config, home, &loaded.env);
            let payload = Payload {
                tool_name: event.contains("tool").then(|| tool.clone()),
                tool_input: Some(serde_json::json!({"command": "echo hello"})),
                session_id: "hooks-test".to_owned(),
                ..Payload::default()
            };
            let runtime = match small_runtime() {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = writeln!(err, "error: {e}");
                    return EXIT_FAILURE;
                }
            };
            for spec in specs {
                let answer = runtime.block_on(runner.run_one(&spec, &payload.to_json(&event)));
                let shown = match answer {
                    Answer::Block(reason) => format!("blocks: {reason}"),
                    Answer::Context(text) => format!("adds context: {text}"),
                    Answer::Nothing => "no answer (see warnings above for failures)".to_owned(),
                };
                let _ = writeln!(out, "{} -> {shown}", spec.command);
            }
            0
        }
    }
}

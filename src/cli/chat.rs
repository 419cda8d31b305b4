//! `hermesd chat`: talk to the agent from a terminal. Interactive by default (streamed
//! output, tool progress lines, approval prompts); `-q "..."` runs one turn and exits with
//! 0 on success, 1 on failure.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use clap::Args;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;

use super::EXIT_FAILURE;
use crate::agent::{Agent, AgentEvent, UserPrompts, new_session_id};
use crate::config::{self, EXIT_CONFIG};
use crate::home::HermesHome;
use crate::state::Store;
use crate::tools::approval::{ApprovalDecision, ApprovalPrompt, ApprovalRequest};
use crate::tools::clarify::{ClarifyCallback, ClarifyRequest};

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Run one turn with this message, print the reply and exit.
    #[arg(short = 'q', long = "query")]
    pub query: Option<String>,
    /// Continue a stored session (id or unique prefix).
    #[arg(long)]
    pub resume: Option<String>,
}

type Lines = Arc<Mutex<mpsc::Receiver<String>>>;

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, args: ChatArgs) -> i32 {
    let loaded = match config::load(home, env) {
        Ok(loaded) => loaded,
        Err(errors) => {
            eprintln!("{}", crate::logging::mask(&errors.to_string()));
            return EXIT_CONFIG;
        }
    };
    for warning in &loaded.warnings {
        eprintln!("warning: {warning}");
    }
    if let Err(e) = home.ensure_exists() {
        eprintln!("error: cannot create {}: {e}", home.path().display());
        return EXIT_FAILURE;
    }
    let runtime = match super::runtime::multi_thread() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    runtime.block_on(async move {
        let store = match crate::gateway::cluster::open_configured_store(home, &loaded).await {
            Ok(store) => store,
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_FAILURE;
            }
        };
        let code = chat(home, &loaded, &store, args).await;
        store.close().await;
        code
    })
}

/// Reads stdin lines on a task so a turn and an approval prompt can both take input.
fn stdin_lines() -> Lines {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tx.send(line).await.is_err() {
                break;
            }
        }
    });
    Arc::new(Mutex::new(rx))
}

/// At a terminal the operator is present: each configured hook not yet approved is shown
/// and approved on "y" (recorded in the allowlist, as Hermes asks on first use). Anything
/// else leaves it off for this run.
async fn ask_hook_consent(home: &HermesHome, loaded: &config::LoadedConfig, lines: &Lines) {
    if loaded.config.hooks.auto_accept {
        return;
    }
    let user_home = loaded.env.get("HOME").map(std::path::PathBuf::from);
    for (spec, consent) in crate::hooks::consent_of(&loaded.config.hooks, home) {
        if consent == crate::hooks::Consent::Approved {
            continue;
        }
        eprint!(
            "\n⚠️  A hook from config.yaml wants to run commands as you:\n    event:   {}\n    command: {}\n   approve it? [y/N] ",
            spec.event, spec.command
        );
        let _ = std::io::stderr().flush();
        let answer = lines.lock().await.recv().await.unwrap_or_default();
        if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
            if let Err(e) = crate::hooks::allowlist::approve(
                home,
                &spec.event,
                &spec.command,
                user_home.as_deref(),
            ) {
                eprintln!("error: the approval could not be recorded: {e}");
            }
        } else {
            eprintln!("not approved: this hook does not run");
        }
    }
}

/// Asks about a dangerous command on the terminal.
fn approval_prompt(lines: Lines) -> ApprovalPrompt {
    Arc::new(move |request: ApprovalRequest| {
        let lines = Arc::clone(&lines);
        Box::pin(async move {
            let always = if request.allow_permanent {
                ", [a]lways"
            } else {
                ""
            };
            eprint!(
                "\n⚠️  Dangerous command ({}):\n    {}\n   allow [o]nce, for this [s]ession{always}, or [d]eny? ",
                request.description, request.command
            );
            let _ = std::io::stderr().flush();
            let answer = lines.lock().await.recv().await.unwrap_or_default();
            match answer.trim().to_lowercase().as_str() {
                "o" | "once" | "y" | "yes" => ApprovalDecision::Once,
                "s" | "session" => ApprovalDecision::Session,
                "a" | "always" if request.allow_permanent => ApprovalDecision::Always,
                _ => ApprovalDecision::Deny,
            }
        })
    })
}

/// Asks the agent's clarifying question on the terminal.
fn clarify_prompt(lines: Lines) -> ClarifyCallback {
    Arc::new(move |request: ClarifyRequest| {
        let lines = Arc::clone(&lines);
        Box::pin(async move {
            eprintln!("\n❓ {}", request.question);
            if let Some(choices) = &request.choices {
                for (i, choice) in choices.iter().enumerate() {
                    eprintln!("   {}. {choice}", i + 1);
                }
            }
            eprint!("   answer: ");
            let _ = std::io::stderr().flush();
            let answer = lines
                .lock()
                .await
                .recv()
                .await
                .ok_or(crate::tools::clarify::ClarifyError::InputClosed)?;
            let answer = answer.trim().to_owned();
            let picked = request.choices.as_ref().and_then(|choices| {
                answer
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| choices.get(n.wrapping_sub(1)).cloned())
            });
            Ok(picked.unwrap_or(answer))
        })
    })
}

async fn chat(
    home: &HermesHome,
    loaded: &config::LoadedConfig,
    store: &Store,
    args: ChatArgs,
) -> i32 {
    let interactive = args.query.is_none();
    let lines = stdin_lines();
    let prompts = if interactive {
        UserPrompts {
            approval: Some(approval_prompt(Arc::clone(&lines))),
            clarify: Some(clarify_prompt(Arc::clone(&lines))),
        }
    } else {
        UserPrompts::default()
    };
    if interactive && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        ask_hook_consent(home, loaded, &lines).await;
    }
    let mcp = crate::agent::assembly::start_mcp(loaded);
    mcp.settled().await;
    let deps = match crate::agent::assemble(home, loaded, store.clone(), prompts, None, &mcp) {
        Ok(deps) => deps,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILURE;
        }
    };
    let agent = match &args.resume {
        Some(prefix) => match store.resolve_session_id(prefix).await {
            Ok(id) => Agent::resume(Arc::clone(&deps), id).await,
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_FAILURE;
            }
        },
        None => Agent::create(Arc::clone(&deps), new_session_id(), "cli", None).await,
    };
    let mut agent = match agent {
        Ok(agent) => agent,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILURE;
        }
    };
    if let Some(query) = args.query {
        let code = match one_turn(&mut agent, &query, false).await {
            Ok(true) => 0,
            Ok(false) => EXIT_FAILURE,
            Err(e) => {
                eprintln!("error: {e}");
                EXIT_FAILURE
            }
        };
        deps.processes.kill_all(None).await;
        mcp.shutdown(std::time::Duration::from_secs(5)).await;
        return code;
    }
    eprintln!(
        "hermesd chat — session {} (type /exit to leave, Ctrl-C interrupts a turn)",
        agent.session_id()
    );
    loop {
        eprint!("\n› ");
        let _ = std::io::stderr().flush();
        let Some(line) = lines.lock().await.recv().await else {
            break;
        };
        let text = line.trim();
        match text {
            "" => continue,
            "/exit" | "/quit" => break,
            _ => {
                if let Err(e) = one_turn(&mut agent, text, true).await {
                    eprintln!("error: {e}");
                }
            }
        }
    }
    eprintln!(
        "session {} — resume with: hermesd chat --resume {}",
        agent.session_id(),
        agent.session_id()
    );
    mcp.shutdown(std::time::Duration::from_secs(5)).await;
    0
}

/// Runs one turn, printing events; Ctrl-C interrupts it. `Ok(false)` when interrupted.
async fn one_turn(
    agent: &mut Agent,
    text: &str,
    interactive: bool,
) -> Result<bool, crate::agent::AgentError> {
    let (events, mut rx) = crate::agent::event_channel();
    let cancel = CancellationToken::new();
    let interrupt = cancel.clone();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            interrupt.cancel();
        }
    });
    let printer = tokio::spawn(async move {
        let mut streamed = false;
        while let Some(event) = rx.recv().await {
            match event {
                AgentEvent::Delta(t) => {
                    streamed = true;
                    print!("{t}");
                    let _ = std::io::stdout().flush();
                }
                AgentEvent::StreamRestart if streamed => {
                    eprintln!("\n  (the model connection was retried; the reply starts over)");
                }
                AgentEvent::ToolStarted {
                    emoji,
                    name,
                    preview,
                    ..
                } => {
                    eprintln!("  {emoji} {name}: {preview}");
                }
                AgentEvent::ToolFinished {
                    name, ok: false, ..
                } => eprintln!("  ✗ {name} failed"),
                AgentEvent::Compressed { to, .. } => {
                    eprintln!("  (context compressed; continuing in session {to})")
                }
                AgentEvent::Status(s) => eprintln!("  ({s})"),
                _ => {}
            }
        }
        streamed
    });
    let outcome = agent.run_turn(text, &events, &cancel).await;
    drop(events);
    ctrl_c.abort();
    let streamed = printer.await.unwrap_or(false);
    let outcome = outcome?;
    if outcome.interrupted {
        eprintln!("\n(interrupted)");
        return Ok(false);
    }
    if streamed {
        println!();
    } else {
        println!("{}", outcome.reply);
    }
    if !interactive {
        let _ = std::io::stdout().flush();
    }
    Ok(true)
}

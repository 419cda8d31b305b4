//! `hermesd sessions ...`: list, show, search, export, prune, delete, rename, stats.
//!
//! Tables for people by default, `--json` for scripts. Every failure is one line on stderr
//! and exit code 1.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use serde::Serialize;

use super::format::{table, timestamp, truncate};
use super::{EXIT_FAILURE, small_runtime};
use crate::home::HermesHome;
use crate::state::{Content, SearchQuery, Store, StoreError, StoreResult};

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List recent sessions, newest first.
    List {
        #[arg(long)]
        source: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// Show one session (id or unique id prefix) with its messages.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Full-text search across all messages.
    Search {
        query: String,
        /// Only these sources (repeatable).
        #[arg(long)]
        source: Vec<String>,
        /// Leave out these sources (repeatable).
        #[arg(long)]
        exclude_source: Vec<String>,
        /// Only these roles (repeatable): user, assistant, tool.
        #[arg(long)]
        role: Vec<String>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// Export one session as JSON, or all sessions as JSON lines.
    Export {
        /// The session to export; all sessions when omitted.
        id: Option<String>,
        #[arg(long)]
        source: Option<String>,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Delete ended sessions older than N days.
    Prune {
        #[arg(long, value_name = "DAYS", default_value_t = 90.0)]
        older_than: f64,
        #[arg(long)]
        source: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Delete one session and its messages (its child sessions are kept).
    Delete {
        id: String,
        /// Confirm the deletion.
        #[arg(long)]
        yes: bool,
    },
    /// Set a session's title (an empty title clears it).
    Rename { id: String, title: String },
    /// Token and cost totals by model.
    Stats {
        #[arg(long)]
        json: bool,
    },
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, command: SessionsCommand) -> i32 {
    let runtime = match small_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    // The configuration says where the sessions are (state.db or PostgreSQL).
    let loaded = match crate::config::load(home, env) {
        Ok(loaded) => loaded,
        Err(errors) => {
            eprintln!("{}", crate::logging::mask(&errors.to_string()));
            return crate::config::EXIT_CONFIG;
        }
    };
    runtime.block_on(async {
        let store = match crate::gateway::cluster::open_configured_store(home, &loaded).await {
            Ok(store) => store,
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_FAILURE;
            }
        };
        let result = execute(&store, command).await;
        store.close().await;
        match result {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e}");
                EXIT_FAILURE
            }
        }
    })
}

/// Errors of this command: the store's, or a failure to write the output.
#[derive(Debug, thiserror::Error)]
enum CommandError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Usage(String),
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

fn print_json<T: Serialize>(value: &T) -> Result<(), CommandError> {
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    println!("{text}");
    Ok(())
}

async fn resolve(store: &Store, id: &str) -> StoreResult<String> {
    store.resolve_session_id(id).await
}

async fn execute(store: &Store, command: SessionsCommand) -> Result<(), CommandError> {
    match command {
        SessionsCommand::List {
            source,
            limit,
            json,
        } => {
            let sessions = store.recent_sessions(source.as_deref(), limit).await?;
            if json {
                return print_json(&sessions);
            }
            let rows: Vec<Vec<String>> = sessions
                .iter()
                .map(|s| {
                    vec![
                        s.session.id.clone(),
                        s.session.source.clone(),
                        timestamp(s.last_active),
                        s.session.message_count.to_string(),
                        truncate(s.session.title.as_deref().unwrap_or(&s.preview), 48),
                    ]
                })
                .collect();
            print!(
                "{}",
                table(
                    &["ID", "SOURCE", "LAST ACTIVE", "MSGS", "TITLE / PREVIEW"],
                    &rows
                )
            );
            Ok(())
        }
        SessionsCommand::Show { id, json } => {
            let id = resolve(store, &id).await?;
            let export = store
                .export_session(&id)
                .await?
                .ok_or_else(|| StoreError::SessionNotFound(id.clone()))?;
            if json {
                return print_json(&export);
            }
            let s = &export.session;
            println!("session   {}", s.id);
            println!("title     {}", s.title.as_deref().unwrap_or("-"));
            println!("source    {}", s.source);
            println!("model     {}", s.model.as_deref().unwrap_or("-"));
            println!("started   {}", timestamp(s.started_at));
            if let Some(ended) = s.ended_at {
                let reason = s.end_reason.as_deref().unwrap_or("-");
                println!("ended     {} ({reason})", timestamp(ended));
            }
            if let Some(parent) = &s.parent_session_id {
                println!("parent    {parent}");
            }
            println!(
                "messages  {} ({} tool calls), tokens in {} / out {}",
                s.message_count, s.tool_call_count, s.input_tokens, s.output_tokens
            );
            println!();
            for m in &export.messages {
                let text = match &m.content {
                    Some(Content::Text(t)) => t.clone(),
                    Some(Content::Json(v)) => v.to_string(),
                    None => m
                        .tool_calls
                        .as_ref()
                        .map(|v| v.to_string())
                        .unwrap_or_default(),
                };
                println!(
                    "[{}] {}: {}",
                    timestamp(m.timestamp),
                    m.role,
                    truncate(&text, 200)
                );
            }
            Ok(())
        }
        SessionsCommand::Search {
            query,
            source,
            exclude_source,
            role,
            limit,
            json,
        } => {
            let mut request = SearchQuery::new(query);
            request.source_filter = source;
            request.exclude_sources = exclude_source;
            request.role_filter = role;
            request.limit = limit;
            let hits = store.search(request).await?;
            if json {
                return print_json(&hits);
            }
            let rows: Vec<Vec<String>> = hits
                .iter()
                .map(|h| {
                    vec![
                        h.session_id.clone(),
                        h.role.clone(),
                        timestamp(h.timestamp),
                        truncate(&h.snippet, 80),
                    ]
                })
                .collect();
            print!("{}", table(&["SESSION", "ROLE", "TIME", "SNIPPET"], &rows));
            Ok(())
        }
        SessionsCommand::Export { id, source, output } => {
            let mut out: Box<dyn Write> = match &output {
                Some(path) => Box::new(std::io::BufWriter::new(std::fs::File::create(path)?)),
                None => Box::new(std::io::stdout().lock()),
            };
            match id {
                Some(id) => {
                    let id = resolve(store, &id).await?;
                    let export = store
                        .export_session(&id)
                        .await?
                        .ok_or_else(|| StoreError::SessionNotFound(id.clone()))?;
                    serde_json::to_writer_pretty(&mut out, &export)
                        .map_err(std::io::Error::other)?;
                    writeln!(out)?;
                }
                None => {
                    for export in store.export_all(source.as_deref()).await? {
                        serde_json::to_writer(&mut out, &export).map_err(std::io::Error::other)?;
                        writeln!(out)?;
                    }
                }
            }
            out.flush()?;
            Ok(())
        }
        SessionsCommand::Prune {
            older_than,
            source,
            json,
        } => {
            if !(older_than.is_finite() && older_than >= 0.0) {
                return Err(CommandError::Usage(format!(
                    "--older-than must be a non-negative number of days, got {older_than}"
                )));
            }
            let deleted = store.prune_sessions(older_than, source.as_deref()).await?;
            if json {
                return print_json(&serde_json::json!({ "deleted": deleted }));
            }
            println!("pruned {deleted} ended session(s) older than {older_than} days");
            Ok(())
        }
        SessionsCommand::Delete { id, yes } => {
            let id = resolve(store, &id).await?;
            if !yes {
                return Err(CommandError::Usage(format!(
                    "refusing to delete session {id} without --yes"
                )));
            }
            store.delete_session(&id).await?;
            println!("deleted session {id}");
            Ok(())
        }
        SessionsCommand::Rename { id, title } => {
            let id = resolve(store, &id).await?;
            store.set_session_title(&id, Some(&title)).await?;
            match store.get_session(&id).await?.and_then(|s| s.title) {
                Some(title) => println!("session {id} is now titled {title:?}"),
                None => println!("session {id} has no title"),
            }
            Ok(())
        }
        SessionsCommand::Stats { json } => {
            let stats = store.model_stats().await?;
            if json {
                return print_json(&stats);
            }
            let rows: Vec<Vec<String>> = stats
                .iter()
                .map(|m| {
                    vec![
                        m.model.clone(),
                        m.session_count.to_string(),
                        m.total_input.to_string(),
                        m.total_output.to_string(),
                        m.total_cost
                            .map(|c| format!("${c:.4}"))
                            .unwrap_or("-".into()),
                    ]
                })
                .collect();
            print!(
                "{}",
                table(
                    &["MODEL", "SESSIONS", "INPUT TOKENS", "OUTPUT TOKENS", "COST"],
                    &rows
                )
            );
            Ok(())
        }
    }
}

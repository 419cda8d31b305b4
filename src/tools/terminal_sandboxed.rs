//! The terminal tool when `terminal:` configures a sandbox, container or remote machine: the
//! same wrapped script (approval already given, cwd marker) runs through the scope's
//! [`Backend`]. A backend that went away mid-command is discarded and the model is told so;
//! the next command gets a fresh one. Background processes exist only where commands are
//! host processes (the bubblewrap sandbox); remote backends refuse them with a reason.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::backend::{Backend, BackendError, Exec, SandboxRef};
use super::context::ToolCtx;
use super::env::command_env;
use super::terminal_result::{blocked, render, started};
use super::terminal_script::{cwd_marker, extract_cwd, wrap_command};

/// One terminal call, already approved.
pub struct Request<'a> {
    pub command: &'a str,
    pub background: bool,
    pub workdir: Option<&'a str>,
    pub timeout: Duration,
    pub approval_note: Option<String>,
}

/// What the model reads when the backend failed.
fn backend_failure(error: &BackendError) -> String {
    let message = match error {
        BackendError::Gone { .. } => format!(
            "{error}. The command's effects inside it are lost; the next command starts in a fresh one."
        ),
        BackendError::Unavailable { .. } => {
            format!("{error}. Commands cannot run until the operator fixes it.")
        }
        _ => format!("Command execution failed: {error}"),
    };
    json!({"output": "", "exit_code": -1, "error": message, "status": "error"}).to_string()
}

/// The directory the session's shell is in on this backend.
fn session_cwd(ctx: &ToolCtx, backend: &dyn Backend) -> String {
    ctx.processes
        .session_cwd(&ctx.session_id)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| backend.default_cwd())
}

/// `workdir` against the session's directory (absolute ones as given).
fn joined(base: &str, workdir: Option<&str>) -> String {
    match workdir {
        Some(w) if w.starts_with('/') || w.starts_with('~') => w.to_owned(),
        Some(w) => format!("{}/{w}", base.trim_end_matches('/')),
        None => base.to_owned(),
    }
}

/// Runs the request in `sandbox`'s backend.
pub async fn run(ctx: &ToolCtx, sandbox: &SandboxRef, request: Request<'_>) -> String {
    let backend = match sandbox.backend().await {
        Ok(backend) => backend,
        Err(e) => {
            tracing::warn!(scope = %sandbox.scope.id(), error = %e, "sandbox unavailable");
            return backend_failure(&e);
        }
    };
    let on_host = backend.host_roots().is_some();
    let env = if on_host {
        command_env(&ctx.env, &ctx.home)
    } else {
        crate::process::env::forced_env(&ctx.env)
    };
    let cwd = session_cwd(ctx, backend.as_ref());
    let target = joined(&cwd, request.workdir);

    if request.background {
        let Some(script) = backend.host_command(request.command, &target, &env) else {
            return blocked(
                &format!(
                    "Background processes are not available on the {} backend; run the command in the foreground (with a timeout), or start it detached yourself inside the target and check on it with later commands.",
                    backend.kind()
                ),
                "error",
            );
        };
        let host_dir = PathBuf::from(backend.default_cwd());
        return match ctx.processes.spawn_as(
            request.command,
            &script,
            &host_dir,
            &ctx.session_id,
            env,
            ctx.caller.process_origin(),
        ) {
            Ok(session) => started(&session, request.approval_note),
            Err(e) => json!({"output": "", "exit_code": -1,
                "error": format!("Failed to start background process: {e}")})
            .to_string(),
        };
    }

    let marker = cwd_marker();
    let exec = Exec {
        script: wrap_command(request.command, &target, &marker),
        cwd: cwd.clone(),
        env,
        timeout: request.timeout,
        max_chars: ctx.limits.max_output_chars,
    };
    let run = match backend.run(&exec, &ctx.cancel).await {
        Ok(run) => run,
        Err(e) => {
            if e.is_gone() {
                sandbox.discard(&backend).await;
                ctx.processes.forget_session_cwd(&ctx.session_id);
            }
            tracing::warn!(kind = backend.kind(), scope = %sandbox.scope.id(), error = %e, "terminal command failed in its backend");
            return backend_failure(&e);
        }
    };
    let mut output = run.output;
    if let Some(new_cwd) = extract_cwd(&mut output, &marker).filter(|c| !on_host || c.is_dir())
        && ctx.limits.keep_cwd
    {
        ctx.processes.set_session_cwd(&ctx.session_id, &new_cwd);
    }
    render(
        ctx,
        request.command,
        &output,
        run.exit_code,
        run.interrupted,
        request.approval_note,
    )
}
